/* out[i0, i1, i2, i3] = a[..] op b[..]: element-wise over a 4-d shape, operands read through
 * strides (stride 0 broadcasts), out contiguous.
 * Bindings: 0 a, 1 b, 2 out. */
#ifndef VKG_PARAMS_BINARY_H
#define VKG_PARAMS_BINARY_H
#include "common.h"

#define VKG_BINARY_ADD 0u
#define VKG_BINARY_MUL 1u
#define VKG_BINARY_MASK 2u   /* b != 0 ? a : -inf */
#define VKG_BINARY_SWIGLU 3u /* silu(a) * b        */

VKG_PARAMS_BEGIN(vkg_binary_params)
    vkg_u32 op;
    vkg_u32 shape[4];
    vkg_u32 a_offset;
    vkg_u32 a_strides[4];
    vkg_u32 b_offset;
    vkg_u32 b_strides[4];
    vkg_u32 out_offset;
VKG_PARAMS_END(vkg_binary_params)

#endif
