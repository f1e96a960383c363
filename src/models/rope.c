/* RoPE inverse frequencies and the cos/sin table (see rope.h). */
#include "models/rope.h"

#include <math.h>
#include <string.h>

#define TWO_PI 6.28318530717958647692 /* M_PI is not in strict C11 */

#define ROPE_NAME(ENUM, name) #name,
static const char *const rope_names[VKG_ROPE_TYPE_COUNT] = {VKG_ROPE_TYPES(ROPE_NAME)};
#undef ROPE_NAME
#define ROPE_LIST(ENUM, name) ", " #name
static const char rope_list[] = VKG_ROPE_TYPES(ROPE_LIST); /* ", default, linear, llama3" */
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
    const int64_t half = c->dim / 2;
    for (int64_t i = 0; i < half; i++) {
        /* default: 1 / theta^(2i / dim) */
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
        }
        inv_freq[i] = f;
    }
    *attention_factor = 1.0;
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
