/* Row softmax with the attention prologue fused in:
 *   out[r, j] = softmax_j( scale * in[r, j]  masked )
 * Rows r = (i0, i1, i2) of a contiguous [d0, dim1, dim2, cols] tensor; the mask is causal
 * (j > i2 + causal_offset (+ index) gives weight exactly 0, and with a window also keys window
 * or more behind that position; placed by mask_rows), a boolean tensor (0 blocks) or an
 * additive tensor, read through strides (stride 0 broadcasts).  A row with every entry blocked
 * gives zeros, not NaN.
 * Bindings: 0 in, 1 out, 2 mask, 3 runtime indices (i32). */
#ifndef VKG_PARAMS_SOFTMAX_H
#define VKG_PARAMS_SOFTMAX_H
#include "common.h"

#define VKG_SOFTMAX_MASK_NONE 0u
#define VKG_SOFTMAX_MASK_CAUSAL 1u
#define VKG_SOFTMAX_MASK_BOOL 2u
#define VKG_SOFTMAX_MASK_ADDITIVE 3u

VKG_PARAMS_BEGIN(vkg_softmax_params)
    vkg_u32 rows, cols;
    vkg_u32 dim1, dim2;
    vkg_u32 in_offset, out_offset;
    vkg_f32 scale;
    vkg_u32 mask_kind;
    vkg_i32 causal_offset;
    vkg_u32 dyn_index;
    vkg_u32 mask_offset;
    vkg_u32 mask_strides[4];
    vkg_u32 window;           /* causal: > 0 also blocks j <= i2 + causal_offset (+ index) - window */
    vkg_u32 mask_rows;        /* VKG_MASK_ROWS_* (params/common.h): i0's index, i2 not added */
VKG_PARAMS_END(vkg_softmax_params)

#endif
