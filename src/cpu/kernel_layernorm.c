/* Layer normalisation over rows of cols contiguous elements:
 *   mean = sum_c x[c] / cols
 *   var  = sum_c (x[c] - mean)^2 / cols          (biased, as PyTorch's LayerNorm)
 *   y[c] = (x[c] - mean) / sqrt(var + eps) * gamma[c] + beta[c]
 * gamma and beta each only when their flag is set.  Two passes (mean, then the deviations) keep
 * the variance accurate when the mean is large. */
#include "cpu/kernels.h"

void vkg_cpu_layernorm(const vkg_layernorm_params *p, const float *in, float *out,
                       const float *gamma, const float *beta, size_t row_begin, size_t row_end) {
    const float *g = (p->flags & VKG_LAYERNORM_GAMMA) ? gamma + p->gamma_offset : NULL;
    const float *b = (p->flags & VKG_LAYERNORM_BETA) ? beta + p->beta_offset : NULL;
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
