/* out[i0, i1, i2, i3] = f(in[i0, i1, i2, i3]) over a 4-d shape, both sides strided: this is also
 * the copy that materialises views, fills one part of a concat, and writes into a state tensor.
 * Bindings: 0 in, 1 out, 2 runtime indices (i32). */
#ifndef VKG_PARAMS_UNARY_H
#define VKG_PARAMS_UNARY_H
#include "activation.h"
#include "common.h"

VKG_PARAMS_BEGIN(vkg_unary_params)
    vkg_u32 op;               /* a VKG_UNARY_* code (params/unary_ops.def)            */
    vkg_f32 alpha;
    vkg_i32 causal_offset;
    vkg_u32 dyn_index;        /* runtime index added to causal_offset, or VKG_NO_INDEX */
    vkg_u32 shape[4];
    vkg_u32 in_offset;
    vkg_u32 in_strides[4];
    vkg_u32 out_offset;
    vkg_u32 out_strides[4];
    vkg_u32 out_dyn_stride;   /* out_offset += index[dyn_index] * out_dyn_stride       */
    vkg_u32 window;           /* causal: > 0 also blocks keys window or more behind    */
    vkg_u32 dyn_rows;         /* copy: 1 = each i0 its own index, index[dyn_index + i0] */
VKG_PARAMS_END(vkg_unary_params)

#endif
