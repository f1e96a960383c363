/* Fused attention: for each query row t of each batch entry (b0, b1),
 *   s_j   = scale * sum_d q[t, d] k[j, d]            for keys j = 0 .. S-1
 *   o[t]  = sum_j softmax_j(s_j, masked) v[j, :]
 * without the [T, S] matrix of probabilities ever being stored: the keys are walked once with a
 * running maximum and sum (the online softmax), rescaling the accumulated output whenever the
 * maximum grows.  The mask is causal (key j > last = t + causal_offset (+ index) is blocked; with a
 * sliding window, keys j <= last - window too) or none, placed by mask_rows (below).
 * A row whose keys are all blocked gives zeros, as softmax then matmul does.
 * Every operand is read through strides (stride 0 broadcasts a batch dimension).
 * Bindings: 0 q, 1 k, 2 v, 3 out, 4 runtime indices (i32). */
#ifndef VKG_PARAMS_ATTENTION_H
#define VKG_PARAMS_ATTENTION_H
#include "common.h"

#define VKG_ATTENTION_MASK_NONE 0u
#define VKG_ATTENTION_MASK_CAUSAL 1u

/* Grouped-query attention: keys and values broadcast over b1 (the G query heads of a key/value
 * head, as vkg_layer_attention lays them out, [Hkv, G, T, D] against [Hkv, 1, S, D]).  The
 * kernels then take the rows of one b0 as one run of batch1 * T rows (b1 major), so that the
 * heads of a group are computed together and read their keys and values once.  `a` is the
 * parameter block (in C, *p). */
#define VKG_ATTENTION_GROUPED(a) ((a).k_stride_b1 == 0u && (a).v_stride_b1 == 0u && (a).batch1 > 1u)

/* The widest v row the kernels keep in registers; the compiler fuses only up to it. */
#define VKG_ATTENTION_MAX_DV 256u

VKG_PARAMS_BEGIN(vkg_attention_params)
    vkg_u32 T, S, D, Dv;              /* query rows, keys, q/k width, v/out width           */
    vkg_u32 batch0, batch1;
    vkg_u32 q_offset, q_stride_t, q_stride_b0, q_stride_b1;
    vkg_u32 k_offset, k_stride_s, k_stride_b0, k_stride_b1;
    vkg_u32 v_offset, v_stride_s, v_stride_b0, v_stride_b1;
    vkg_u32 o_offset, o_stride_t, o_stride_b0, o_stride_b1;
    vkg_u32 q_stride_d, k_stride_d, v_stride_d, o_stride_d;
    vkg_f32 scale;
    vkg_u32 mask_kind;
    vkg_i32 causal_offset;
    vkg_u32 dyn_index;
    vkg_u32 window;                   /* causal: > 0 also blocks keys j <= last - window */
    vkg_u32 mask_rows;                /* VKG_MASK_ROWS_* (params/common.h): entry b0's index, t
                                         not added                                           */
VKG_PARAMS_END(vkg_attention_params)

#endif
