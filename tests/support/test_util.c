#include "support/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double test_nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return num / (den > 1e-30 ? den : 1e-30);
}

double test_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

char *mkdtemp(char *template);

char *test_tmpdir(const char *tag) {
    char buf[256];
    snprintf(buf, sizeof buf, "/tmp/vkg-test-%s-XXXXXX", tag);
    if (!mkdtemp(buf)) return NULL;
    return strdup(buf);
}
