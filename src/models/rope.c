/* Rotary embeddings' frequencies and cos/sin tables (see rope.h). */
#include "models/rope.h"

#include <math.h>
#include <stdlib.h>

void vkg_rope_inv_freq(const vkg_rope_config *r, int head_dim, double *inv_freq) {
    const int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        double f = 1.0 / pow(r->theta, (double)(2 * i) / (double)head_dim);
        if (r->kind == VKG_ROPE_LINEAR) f /= r->factor;
        if (r->kind == VKG_ROPE_LLAMA3) {
            /* transformers' _compute_llama3_parameters, element by element */
            const double old = (double)r->original_max_position_embeddings;
            const double low_wavelen = old / r->low_freq_factor, high_wavelen = old / r->high_freq_factor;
            const double wavelen = 2.0 * 3.14159265358979323846 / f; /* torch.pi */
            double g = wavelen > low_wavelen ? f / r->factor : f;
            if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
                const double smooth = (old / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
                g = (1.0 - smooth) * g / r->factor + smooth * g;
            }
            f = g;
        }
        inv_freq[i] = f;
    }
}

float *vkg_rope_table(const vkg_rope_config *r, int head_dim, int positions) {
    const size_t half = (size_t)head_dim / 2, n = (size_t)positions * half;
    float *t = malloc(2 * n * sizeof *t);
    double *inv = malloc(half * sizeof *inv);
    if (!t || !inv) {
        free(t);
        free(inv);
        return NULL;
    }
    vkg_rope_inv_freq(r, head_dim, inv);
    for (size_t p = 0; p < (size_t)positions; p++)
        for (size_t i = 0; i < half; i++) {
            const double a = (double)p * inv[i];
            t[p * half + i] = (float)cos(a);
            t[n + p * half + i] = (float)sin(a);
        }
    free(inv);
    return t;
}
