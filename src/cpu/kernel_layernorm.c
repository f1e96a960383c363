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
 *   - two passes: the mean, then the squared deviations from it (no cancellation);
 *   - eps joins the variance in the row's scale, eps a^2 (norm_scale.h: without overflow).
 * Floating-point contraction is off for the whole library (CMakeLists.txt), so these are the
 * same operations, rounded alike, whichever compiler builds them.
 * RMS norm (VKG_LAYERNORM_RMS), as Llama's RMSNorm: no mean and no beta,
 *   y[c] = x[c] / sqrt(sum_c x[c]^2 / cols + eps) * gamma[c]
 * scaled the same way. */
#include "cpu/kernels.h"
#include "cpu/norm_scale.h"

/* RMS norm over the row scaled by a (norm_scale.h): x / sqrt(mean(x^2) + eps) = x a / sqrt(mean((x
 * a)^2) + eps a^2).  The sum of squares runs in four lanes (vectorizes without reassociating a
 * single sum; the lanes' order is fixed, so a row's result does not depend on the thread count). */
static void rms_norm(const vkg_layernorm_params *p, const float *in, float *out, const float *g,
                     size_t row_begin, size_t row_end) {
    const size_t n = p->cols;
    for (size_t r = row_begin; r < row_end; r++) {
        const float *x = in + p->in_offset + r * n;
        float *y = out + p->out_offset + r * n;
        float m = 0.0f;
        for (size_t c = 0; c < n; c++) m = fabsf(x[c]) > m ? fabsf(x[c]) : m;
        const vkg_norm_scale sc = vkg_norm_scale_of(m);
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
        /* in place is safe: each x[c] is read before y[c] is written */
        for (c = 0; c < n; c++) y[c] = g ? (x[c] * sc.a) * rstd * g[c] : (x[c] * sc.a) * rstd;
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
    for (size_t r = row_begin; r < row_end; r++) {
        const float *x = in + p->in_offset + r * p->cols;
        float *y = out + p->out_offset + r * p->cols;

        float m = 0.0f;
        for (size_t c = 0; c < p->cols; c++) m = fabsf(x[c]) > m ? fabsf(x[c]) : m;
        const vkg_norm_scale s = vkg_norm_scale_of(m);
        const float x0 = x[0] * s.a;

        float sum = 0.0f;
        for (size_t c = 0; c < p->cols; c++) sum += x[c] * s.a - x0;
        const float mean = sum / (float)p->cols; /* of x a - x0 */

        float sum_sq = 0.0f;
        for (size_t c = 0; c < p->cols; c++) {
            const float d = (x[c] * s.a - x0) - mean;
            sum_sq += d * d;
        }
        const float rstd = vkg_norm_rstd(s, sum_sq / (float)p->cols, p->eps); /* of the scaled row */

        /* y may be x (in place): each x[c] is read before y[c] is written. */
        for (size_t c = 0; c < p->cols; c++) {
            float v = ((x[c] * s.a - x0) - mean) * rstd;
            if (g) v *= g[c];
            if (b) v += b[c];
            y[c] = v;
        }
    }
}
