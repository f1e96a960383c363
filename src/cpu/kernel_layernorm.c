/* Layer normalisation over rows of cols contiguous elements:
 *   mean = sum_c x[c] / cols
 *   var  = sum_c (x[c] - mean)^2 / cols          (biased, as PyTorch's LayerNorm)
 *   y[c] = (x[c] - mean) / sqrt(var + eps) * gamma[c] + beta[c]
 * gamma and beta each only when their flag is set.
 *
 * How it keeps its precision, whatever the row's magnitude (shaders/layernorm.comp computes the
 * same way, norm_scale.h holds the shared steps):
 *   - the row is first scaled by a power of two a (exact) so that its largest magnitude lies in
 *     [0.5, 1): squares of deviations of 1e-30 (2^-200 underflows) or of 1e20 (2^133 overflows)
 *     would otherwise give a variance of 0 or inf;
 *   - sums are of x a - x0 a (x0 the row's first element): a row with a large mean keeps the
 *     precision of its deviations (the difference of close values is exact);
 *   - two passes: the mean, then the squared deviations from it (no cancellation), each summed
 *     in 16 lanes (lanes_sum, below);
 *   - eps joins the variance in the row's scale, eps a^2 (norm_scale.h: without overflow).
 * Floating-point contraction is off for the whole library (CMakeLists.txt), so these are the
 * same operations, rounded alike, whichever compiler builds them.
 * RMS norm (VKG_LAYERNORM_RMS), as Llama's RMSNorm: no mean and no beta,
 *   y[c] = x[c] / sqrt(sum_c x[c]^2 / cols + eps) * gamma[c]
 * scaled the same way. */
#include "cpu/kernels.h"
#include "cpu/norm_scale.h"

#include <math.h>
#include <string.h>

/* Layer norm's sums run in LANES partial sums, element c into lane c % LANES (so they vectorize
 * without reassociating any one sum), then the lanes are added by halves: lane i + lane i + 8,
 * then i + 4, i + 2, i + 1.  The order is fixed, so a row's result depends on neither the thread
 * count nor the instruction set, and no add waits for the one before it as in one running sum. */
enum { LANES = 16 };

static float lanes_sum(float lane[LANES]) {
    for (int h = LANES / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) lane[i] += lane[i + h];
    return lane[0];
}

/* The largest |x[c]|, c < n, a lane at a time (a maximum is exact, so the order changes nothing;
 * a NaN never wins, as in one running comparison). */
static float row_max_abs(const float *x, size_t n) {
    float lane[LANES] = {0.0f};
    size_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int i = 0; i < LANES; i++) lane[i] = fabsf(x[c + i]) > lane[i] ? fabsf(x[c + i]) : lane[i];
    for (int i = 0; c + i < n; i++) lane[i] = fabsf(x[c + i]) > lane[i] ? fabsf(x[c + i]) : lane[i];
    float m = 0.0f;
    for (int i = 0; i < LANES; i++) m = lane[i] > m ? lane[i] : m;
    return m;
}

/* y[c] = ((x[c] a - x0) - mean) rstd, times g[c] (G), plus b[c] (B): G and B constants at each
 * call, so the loop is straight-line code the compiler vectorizes; y may be x. */
static inline __attribute__((always_inline)) void norm_row_out(int G, int B, float *y, const float *x, const float *g,
                                                              const float *b, size_t n, float a, float x0, float mean,
                                                              float rstd) {
    VKG_CPU_INDEPENDENT_LOOP
    for (size_t c = 0; c < n; c++) {
        float v = ((x[c] * a - x0) - mean) * rstd;
        if (G) v *= g[c];
        if (B) v += b[c];
        y[c] = v;
    }
}

static void norm_out(float *y, const float *x, const float *g, const float *b, size_t n, float a, float x0,
                     float mean, float rstd) {
    if (g && b) norm_row_out(1, 1, y, x, g, b, n, a, x0, mean, rstd);
    else if (g) norm_row_out(1, 0, y, x, g, b, n, a, x0, mean, rstd);
    else if (b) norm_row_out(0, 1, y, x, g, b, n, a, x0, mean, rstd);
    else norm_row_out(0, 0, y, x, g, b, n, a, x0, mean, rstd);
}

/* RMS norm over the row scaled by a (norm_scale.h): x / sqrt(mean(x^2) + eps) = x a / sqrt(mean((x
 * a)^2) + eps a^2).  The sum of squares runs in four lanes (vectorizes without reassociating a
 * single sum; the lanes' order is fixed, so a row's result does not depend on the thread count). */
static void rms_norm(const vkg_layernorm_params *p, const float *in, float *out, const float *g,
                     size_t row_begin, size_t row_end) {
    const size_t n = p->cols;
    for (size_t r = row_begin; r < row_end; r++) {
        const float *x = in + p->in_offset + r * n;
        float *y = out + p->out_offset + r * n;
        const vkg_norm_scale sc = vkg_norm_scale_of(row_max_abs(x, n));
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        size_t c = 0;
        for (; c + 4 <= n; c += 4)
            for (int i = 0; i < 4; i++) {
                const float xa = x[c + i] * sc.a;
                s[i] += xa * xa;
            }
        for (; c < n; c++) {
            const float xa = x[c] * sc.a;
            s[0] += xa * xa;
        }
        const float rstd = vkg_norm_rstd(sc, ((s[0] + s[1]) + (s[2] + s[3])) / (float)n, p->eps);
        norm_out(y, x, g, NULL, n, sc.a, 0.0f, 0.0f, rstd); /* (x a - 0) - 0 is x a, bit for bit */
    }
}

void vkg_cpu_layernorm(const vkg_layernorm_params *p, const float *in, float *out,
                       const float *gamma, const float *beta, size_t row_begin, size_t row_end) {
    const float *g = (p->flags & VKG_LAYERNORM_GAMMA) ? gamma + p->gamma_offset : NULL;
    const float *b = (p->flags & VKG_LAYERNORM_BETA) ? beta + p->beta_offset : NULL;
    if (p->cols == 0) return; /* empty rows: nothing to write */
    if (p->flags & VKG_LAYERNORM_RMS) {
        rms_norm(p, in, out, g, row_begin, row_end);
        return;
    }
    const size_t n = p->cols;
    for (size_t r = row_begin; r < row_end; r++) {
        const float *x = in + p->in_offset + r * n;
        float *y = out + p->out_offset + r * n;
        const vkg_norm_scale s = vkg_norm_scale_of(row_max_abs(x, n));
        const float x0 = x[0] * s.a;

        float lane[LANES] = {0.0f};
        size_t c = 0;
        for (; c + LANES <= n; c += LANES)
            for (int i = 0; i < LANES; i++) lane[i] += x[c + i] * s.a - x0;
        for (int i = 0; c + i < n; i++) lane[i] += x[c + i] * s.a - x0;
        const float mean = lanes_sum(lane) / (float)n; /* of x a - x0 */

        memset(lane, 0, sizeof lane);
        for (c = 0; c + LANES <= n; c += LANES)
            for (int i = 0; i < LANES; i++) {
                const float d = (x[c + i] * s.a - x0) - mean;
                lane[i] += d * d;
            }
        for (int i = 0; c + i < n; i++) {
            const float d = (x[c + i] * s.a - x0) - mean;
            lane[i] += d * d;
        }
        const float rstd = vkg_norm_rstd(s, lanes_sum(lane) / (float)n, p->eps); /* of the scaled row */

        norm_out(y, x, g, b, n, s.a, x0, mean, rstd);
    }
}
