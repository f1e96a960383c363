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
 * Each output pair is written by the invocation that read its two inputs: in place is safe.
 * Bindings: 0 x, 1 table, 2 out, 3 runtime indices (i32), 4 row positions (i32). */
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
VKG_PARAMS_END(vkg_rope_params)

#endif
