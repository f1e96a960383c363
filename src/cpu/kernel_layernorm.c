/* Layer normalisation over rows of cols contiguous elements:
 *   mean = sum_c x[c] / cols
 *   var  = sum_c (x[c] - mean)^2 / cols          (biased, as PyTorch's LayerNorm)
 *   y[c] = (x[c] - mean) / sqrt(var + eps) * gamma[c] + beta[c]
 * gamma and beta each only when their flag is set.  Two passes (mean, then the deviations) keep
 * the variance accurate when the mean is large.
 * RMS norm (VKG_LAYERNORM_RMS), as Llama's RMSNorm: no mean and no beta,
 *   y[c] = x[c] / sqrt(sum_c x[c]^2 / cols + eps) * gamma[c] */
#include "cpu/kernels.h"

/* The sum of squares in four lanes (vectorizes without reassociating a single sum; the
 * lanes' order is fixed, so a row's result does not depend on the thread count). */
static void rms_norm(const vkg_layernorm_params *p, const float *in, float *out, const float *g,
                     size_t row_begin, size_t row_end) {
    const size_t n = p->cols;
    for (size_t r = row_begin; r < row_end; r++) {
        const float *x = in + p->in_offset + r * n;
        float *y = out + p->out_offset + r * n;
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        size_t c = 0;
        for (; c + 4 <= n; c += 4)
            for (int i = 0; i < 4; i++) s[i] += x[c + i] * x[c + i];
        for (; c < n; c++) s[0] += x[c] * x[c];
        const float rstd = 1.0f / sqrtf(((s[0] + s[1]) + (s[2] + s[3])) / (float)n + p->eps);
        /* in place is safe: each x[c] is read before y[c] is written */
        for (c = 0; c < n; c++) y[c] = g ? x[c] * rstd * g[c] : x[c] * rstd;
    }
}

void vkg_cpu_layernorm(const vkg_layernorm_params *p, const float *in, float *out,
                       const float *gamma, const float *beta, size_t row_begin, size_t row_end) {
    const float *g = (p->flags & VKG_LAYERNORM_GAMMA) ? gamma + p->gamma_offset : NULL;
    const float *b = (p->flags & VKG_LAYERNORM_BETA) ? beta + p->beta_offset : NULL;
    if (p->flags & VKG_LAYERNORM_RMS) {
        rms_norm(p, in, out, g, row_begin, row_end);
        return;
    }
    for (size_t r = row_begin; r < row_end; r++) {
        const float *x = in + p->in_offset + r * p->cols;
        float *y = out + p->out_offset + r * p->cols;

        float sum = 0.0f;
        for (size_t c = 0; c < p->cols; c++) sum += x[c];
        float mean = sum / (float)p->cols;

        float sum_sq = 0.0f;
        for (size_t c = 0; c < p->cols; c++) {
            float d = x[c] - mean;
            sum_sq += d * d;
        }
        float var = sum_sq / (float)p->cols;
        float rstd = 1.0f / sqrtf(var + p->eps);

        /* y may be x (in place): each x[c] is read before y[c] is written. */
        for (size_t c = 0; c < p->cols; c++) {
            float v = (x[c] - mean) * rstd;
            if (g) v *= g[c];
            if (b) v += b[c];
            y[c] = v;
        }
    }
}
