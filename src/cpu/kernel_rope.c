/* Rotary position embedding (params/rope.h) on the CPU: units are rows (b0, b1, t), each
 * rotated as a whole so that in place is safe. */
#include "cpu/kernels.h"

size_t vkg_cpu_rope_units(const vkg_rope_params *p) { return (size_t)p->batch0 * p->batch1 * p->T; }

/* Row (b1, t), written to out at o, also into the cache where the row goes there. */
static void to_cache(const vkg_rope_params *p, const float *o, float *cache, const int32_t *indices, size_t b1,
                     size_t t) {
    if (!p->cache_heads || b1 < p->cache_first) return;
    const size_t j = b1 - p->cache_first;
    /* the plan check keeps the index's row inside the cache (vkg_cpu_check_runtime_index) */
    int64_t at = (int64_t)p->cache_offset + (int64_t)(j / p->cache_heads) * p->cache_stride_g +
                 (int64_t)(j % p->cache_heads) * p->cache_stride_a + (int64_t)t * p->cache_stride_t;
    if (p->cache_index != VKG_NO_INDEX)
        at += (int64_t)indices[p->cache_index + (p->cache_rows ? t : 0)] * p->cache_dyn_stride;
    memcpy(cache + at, o, p->D * sizeof *o);
}

void vkg_cpu_rope(const vkg_rope_params *p, const float *x, const float *table, float *out, const int32_t *indices,
                  const int32_t *positions, float *cache, size_t row_begin, size_t row_end) {
    const int64_t base = (int64_t)p->pos_offset + (p->dyn_index != VKG_NO_INDEX ? indices[p->dyn_index] : 0);
    const size_t half = p->D / 2;
    for (size_t r = row_begin; r < row_end; r++) {
        const size_t t = r % p->T, b = r / p->T, b1 = b % p->batch1, b0 = b / p->batch1;
        const float *xr = x + p->x_offset + b0 * p->x_stride_b0 + b1 * p->x_stride_b1 + t * p->x_stride_t;
        float *o = out + p->out_offset + r * p->D;
        const int64_t pos = base + (p->row_positions ? (int64_t)positions[p->positions_offset + t] : (int64_t)t);
        if (b1 >= p->rotated) {
            for (size_t i = 0; i < p->D; i++) o[i] = xr[i * p->x_stride_d];
        } else if (pos < 0 || pos >= (int64_t)p->positions) { /* no table row: NaN, never a stray read */
            for (size_t i = 0; i < p->D; i++) o[i] = NAN;
        } else {
            const float *cs = table + p->table_offset + (size_t)pos * p->D, *sn = cs + half;
            for (size_t i = 0; i < half; i++) {
                const float a = xr[i * p->x_stride_d], bb = xr[(i + half) * p->x_stride_d];
                o[i] = a * cs[i] - bb * sn[i];
                o[i + half] = bb * cs[i] + a * sn[i];
            }
        }
        to_cache(p, o, cache, indices, b1, t);
    }
}
