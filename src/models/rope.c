/* RoPE inverse frequencies and the cos/sin table (see rope.h). */
#include "models/rope.h"

#include <math.h>
#include <string.h>

#define TWO_PI 6.28318530717958647692 /* M_PI is not in strict C11 */

#define ROPE_NAME(ENUM, name) #name,
static const char *const rope_names[VKG_ROPE_TYPE_COUNT] = {VKG_ROPE_TYPES(ROPE_NAME)};
#undef ROPE_NAME
#define ROPE_LIST(ENUM, name) ", " #name
static const char rope_list[] = VKG_ROPE_TYPES(ROPE_LIST); /* ", default, linear, ..." */
#undef ROPE_LIST

const char *vkg_rope_type_name(vkg_rope_type type) {
    return (unsigned)type < VKG_ROPE_TYPE_COUNT ? rope_names[type] : "?";
}

vkg_status vkg_rope_type_parse(const char *name, vkg_rope_type *type, vkg_error *err) {
    if (!name) name = rope_names[VKG_ROPE_DEFAULT];
    for (int t = 0; t < VKG_ROPE_TYPE_COUNT; t++)
        if (strcmp(name, rope_names[t]) == 0) {
            *type = (vkg_rope_type)t;
            return VKG_OK;
        }
    return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "rope_scaling type '%s' is not supported (supported: %s)", name,
                         rope_list + 2);
}

/* YaRN's ramp over the frequency index i: from the index whose wavelength fits beta_fast
 * rotations in the original context to the one that fits beta_slow (rounded outward unless
 * truncate is false), clamped to [0, dim - 1], never empty. */
static void yarn_ramp(const vkg_rope_config *c, double *low, double *high) {
    const double fast = c->beta_fast != 0.0 ? c->beta_fast : 32.0, slow = c->beta_slow != 0.0 ? c->beta_slow : 1.0;
    const double dim = (double)c->dim, old = c->original_max_position_embeddings;
    double lo = dim * log(old / (fast * TWO_PI)) / (2.0 * log(c->theta));
    double hi = dim * log(old / (slow * TWO_PI)) / (2.0 * log(c->theta));
    if (!c->no_truncate) lo = floor(lo), hi = ceil(hi);
    lo = lo > 0.0 ? lo : 0.0;
    hi = hi < dim - 1.0 ? hi : dim - 1.0;
    if (lo == hi) hi += 0.001;
    *low = lo, *high = hi;
}

/* 0.1 m ln(scale) + 1 past a scale of 1 (YaRN's "mscale") */
static double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0; }

static double yarn_attention_factor(const vkg_rope_config *c) {
    if (c->attention_factor != 0.0) return c->attention_factor;
    if (c->mscale != 0.0 && c->mscale_all_dim != 0.0)
        return yarn_mscale(c->factor, c->mscale) / yarn_mscale(c->factor, c->mscale_all_dim);
    return yarn_mscale(c->factor, 1.0);
}

vkg_status vkg_rope_inv_freq(const vkg_rope_config *c, double *inv_freq, double *attention_factor, vkg_error *err) {
    if (c->dim < 2 || c->dim % 2 || c->dim > 65536)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope: rotary width %lld must be even, 2 to 65536",
                             (long long)c->dim);
    if (!(c->theta > 1.0) || !isfinite(c->theta))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope: rope_theta %g must be finite and > 1", c->theta);
    if (c->type != VKG_ROPE_DEFAULT && (!(c->factor >= 1.0) || !isfinite(c->factor)))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope: rope_scaling factor %g must be finite and >= 1",
                             c->factor);
    if (c->type == VKG_ROPE_LLAMA3 &&
        (!(c->high_freq_factor > c->low_freq_factor) || !(c->low_freq_factor > 0.0) ||
         !isfinite(c->high_freq_factor) || !(c->original_max_position_embeddings >= 1.0) ||
         !isfinite(c->original_max_position_embeddings)))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope: llama3 scaling needs 0 < low_freq_factor (%g) < "
                             "high_freq_factor (%g) and original_max_position_embeddings (%g) >= 1",
                             c->low_freq_factor, c->high_freq_factor, c->original_max_position_embeddings);
    if (c->type == VKG_ROPE_YARN &&
        (!(c->original_max_position_embeddings >= 1.0) || !isfinite(c->original_max_position_embeddings) ||
         !(c->beta_fast >= 0.0) || !isfinite(c->beta_fast) || !(c->beta_slow >= 0.0) || !isfinite(c->beta_slow) ||
         !(c->attention_factor >= 0.0) || !isfinite(c->attention_factor) || !isfinite(c->mscale) ||
         !isfinite(c->mscale_all_dim)))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope: yarn scaling needs original_max_position_embeddings "
                             "(%g) >= 1, beta_fast (%g), beta_slow (%g) and attention_factor (%g) finite and not "
                             "negative, mscale and mscale_all_dim finite", c->original_max_position_embeddings,
                             c->beta_fast, c->beta_slow, c->attention_factor);
    const int64_t half = c->dim / 2;
    double ramp_low = 0.0, ramp_high = 1.0;
    if (c->type == VKG_ROPE_YARN) yarn_ramp(c, &ramp_low, &ramp_high);
    for (int64_t i = 0; i < half; i++) {
        /* default (and dynamic within max_position_embeddings, rope.h): 1 / theta^(2i / dim) */
        double f = 1.0 / pow(c->theta, (double)(2 * i) / (double)c->dim);
        if (c->type == VKG_ROPE_LINEAR) {
            f /= c->factor;
        } else if (c->type == VKG_ROPE_LLAMA3) {
            /* wavelengths longer than the original context / low_freq_factor are scaled by 1 /
             * factor, shorter than it / high_freq_factor kept; between, a linear blend in
             * context / wavelength (transformers' _compute_llama3_parameters) */
            const double old = c->original_max_position_embeddings;
            const double low_wavelen = old / c->low_freq_factor, high_wavelen = old / c->high_freq_factor;
            const double wavelen = TWO_PI / f;
            if (wavelen > low_wavelen) {
                f /= c->factor;
            } else if (!(wavelen < high_wavelen)) {
                const double smooth = (old / wavelen - c->low_freq_factor) / (c->high_freq_factor - c->low_freq_factor);
                f = (1.0 - smooth) * f / c->factor + smooth * f;
            }
        } else if (c->type == VKG_ROPE_YARN) {
            /* below the ramp (the fast rotations) kept, above it divided by factor, a linear blend
             * across it */
            double ramp = ((double)i - ramp_low) / (ramp_high - ramp_low);
            ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
            f = f / c->factor * ramp + f * (1.0 - ramp);
        }
        inv_freq[i] = f;
    }
    *attention_factor = c->type == VKG_ROPE_YARN ? yarn_attention_factor(c) : 1.0;
    if (!(*attention_factor > 0.0) || !isfinite(*attention_factor))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "rope: yarn's attention factor is %g (from factor %g, "
                             "mscale %g and mscale_all_dim %g); it must be positive and finite", *attention_factor,
                             c->factor, c->mscale, c->mscale_all_dim);
    return VKG_OK;
}

void vkg_rope_fill_table(const double *inv_freq, int64_t half, double attention_factor, int64_t positions,
                         float *table) {
    for (int64_t p = 0; p < positions; p++) {
        float *row = table + p * 2 * half;
        for (int64_t i = 0; i < half; i++) {
            const double a = (double)p * inv_freq[i];
            row[i] = (float)(attention_factor * cos(a));
            row[half + i] = (float)(attention_factor * sin(a));
        }
    }
}
