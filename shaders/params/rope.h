/* Rotary position embedding (RoPE), Hugging Face's layout (rotate_half: the two halves of each
 * row rotated together, not interleaved pairs).  For each row (b0, b1, t) of x [b0, b1, T, D] at
 * position pos = pos_offset (+ indices[dyn_index]) + t, or with row_positions pos_offset +
 * positions[positions_offset + t] (each row its own position: the rows of several sequences),
 * and i < D / 2:
 *   out[i]         = x[i] cos_i - x[i + D/2] sin_i
 *   out[i + D/2]   = x[i + D/2] cos_i + x[i] sin_i
 * where row pos of the table [P, D] holds cos_i at i and sin_i at D/2 + i (computed on the host
 * in double from the inverse frequencies, rounded once to f32: an angle pos * inv_freq formed in
 * f32 is off by ~1e-3 rad at pos 32768).  A position outside 0 .. P-1 gives NaN rows (never a
 * read outside the table).  Rows with b1 >= rotated are copied as they are: the values that share
 * a projection with the queries and keys pass through the one step that rotates those.
 * x is read through strides; out is contiguous [b0, b1, T, D].
 * With cache_heads > 0 (and batch0 1), rows with b1 >= cache_first (the keys and values of a
 * q/k/v projection) are also stored in a KV cache: row (b1, t), j = b1 - cache_first split as
 * j = g cache_heads + a, at cache_offset + g cache_stride_g + a cache_stride_a + t cache_stride_t
 * (+ indices[cache_index] cache_dyn_stride, or with cache_rows indices[cache_index + t]: each row
 * its own position, the rows of a batch's decode step), so that the cache write costs no step of
 * its own.
 * Each output pair is written by the invocation that read its two inputs: in place is safe.
 * Bindings: 0 x, 1 table, 2 out, 3 runtime indices (i32), 4 row positions (i32), 5 the cache. */
#ifndef VKG_PARAMS_ROPE_H
#define VKG_PARAMS_ROPE_H
#include "common.h"

VKG_PARAMS_BEGIN(vkg_rope_params)
    vkg_u32 T, D, batch0, batch1;       /* rows of a batch entry, row width (even)         */
    vkg_u32 x_offset, x_stride_t, x_stride_d, x_stride_b0, x_stride_b1;
    vkg_u32 out_offset;
    vkg_u32 table_offset, positions;    /* the table's rows, P                              */
    vkg_i32 pos_offset;
    vkg_u32 dyn_index;                  /* runtime index added to pos_offset, or VKG_NO_INDEX */
    vkg_u32 rotated;                    /* rows with b1 below this are rotated, the rest copied */
    vkg_u32 row_positions;              /* 1: row t at positions[positions_offset + t]       */
    vkg_u32 positions_offset;
    vkg_u32 cache_first;                /* rows with b1 from this also go to the cache        */
    vkg_u32 cache_heads;                /* b1 - cache_first = g cache_heads + a; 0: no cache   */
    vkg_u32 cache_offset, cache_stride_g, cache_stride_a, cache_stride_t;
    vkg_u32 cache_index;                /* runtime index moving the rows, or VKG_NO_INDEX      */
    vkg_u32 cache_dyn_stride;           /* elements the cache moves per unit of that index    */
    vkg_u32 cache_rows;                 /* 1: row t at indices[cache_index + t]                */
VKG_PARAMS_END(vkg_rope_params)

#endif
