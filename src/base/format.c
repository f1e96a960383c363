/* Text for people: vkg_shape_str, the one shape printer, and vkg_format_array, a float array printed
 * the way numpy 1.24 prints a float32 array after np.round, so examples and lessons can be read side
 * by side with their Python originals. */
#include "vkgraph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* np.round(x, decimals) in float32 arithmetic, as numpy does it for a float32 array: multiply,
 * round half to even, divide. */
static float round_like_numpy(float x, int decimals) {
    float scale = 1.0f;
    for (int i = 0; i < decimals; i++) scale *= 10.0f;
    /* volatile keeps each step a float operation, as numpy's multiply, rint, divide are */
    volatile float scaled = x * scale;
    volatile float r = rintf(scaled);
    return r / scale;
}

/* One value's digits as numpy's shortest form: integer part, and fraction without trailing
 * zeros ("0.1", "1.", "-0."). */
typedef struct value_text {
    char integer[64];
    char fraction[64];
} value_text;

static void value_digits(float v, int decimals, value_text *t) {
    char full[64];
    if (decimals > 8) decimals = 8;
    snprintf(full, sizeof full, "%.*f", decimals, (double)v);
    if (signbit(v) && full[0] != '-') {   /* -0.0 prints as "-0." in numpy */
        memmove(full + 1, full, strlen(full) + 1);
        full[0] = '-';
    }
    char *dot = strchr(full, '.');
    if (dot) *dot = '\0';
    snprintf(t->integer, sizeof t->integer, "%s", full);
    t->fraction[0] = '\0';
    if (dot) {
        snprintf(t->fraction, sizeof t->fraction, "%s", dot + 1);
        size_t n = strlen(t->fraction);
        while (n > 0 && t->fraction[n - 1] == '0') t->fraction[--n] = '\0';
    }
}

/* Shortest digits per value, one common width for all of them; values stay in fixed notation
 * (numpy's scientific form is never needed for the ranges examples print).  Output that does not
 * fit in size is cut, always terminated. */
char *vkg_format_array(char *buf, size_t size, const float *x, int rows, int cols, int decimals) {
    if (size == 0) return buf;
    buf[0] = '\0';
    size_t int_width = 0, frac_width = 0, used = 0;
    for (int i = 0; i < rows * cols; i++) {
        value_text t;
        value_digits(round_like_numpy(x[i], decimals), decimals, &t);
        if (strlen(t.integer) > int_width) int_width = strlen(t.integer);
        if (strlen(t.fraction) > frac_width) frac_width = strlen(t.fraction);
    }
#define APPEND(...)                                                                  \
    do {                                                                             \
        if (used < size) {                                                           \
            int n_ = snprintf(buf + used, size - used, __VA_ARGS__);                 \
            used = n_ < 0 ? size : used + (size_t)n_;                                \
        }                                                                            \
    } while (0)
    APPEND("[");
    for (int r = 0; r < rows; r++) {
        APPEND(r == 0 ? "[" : "\n [");
        for (int c = 0; c < cols; c++) {
            value_text t;
            value_digits(round_like_numpy(x[r * cols + c], decimals), decimals, &t);
            /* right-align the integer part, left-align the fraction and pad it with spaces */
            APPEND("%s%*s.%-*s", c ? " " : "", (int)int_width, t.integer, (int)frac_width, t.fraction);
        }
        APPEND("]");
    }
    APPEND("]");
#undef APPEND
    return buf;
}

const char *vkg_shape_str(int ndim, const int64_t *shape, char *buf, size_t size) {
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}
