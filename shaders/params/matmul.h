/* C[b0, b1, m, n] = sum_k A[b0, b1, m, k] * B[b0, b1, k, n]  (+ bias[n]) (activation) (+ R[b0, b1, m, n],
 * or times silu(R[b0, b1, m, n]) with VKG_MATMUL_GATE)
 * Shapes: M rows, N columns, K reduction; (batch0, batch1) leading dimensions of C.  A and B are
 * read through strides, so a transpose or a broadcast batch (stride 0) costs nothing.  C and R
 * are row-major with unit column stride.
 * Bindings: 0 A, 1 B, 2 C, 3 bias, 4 R (residual). */
#ifndef VKG_PARAMS_MATMUL_H
#define VKG_PARAMS_MATMUL_H
#include "activation.h"
#include "common.h"

/* flags */
#define VKG_MATMUL_BIAS 1u      /* add bias[n]                                     */
#define VKG_MATMUL_RESIDUAL 4u  /* then, after the activation, add R                */
#define VKG_MATMUL_GATE 32u     /* with RESIDUAL: multiply by silu(R) instead (SwiGLU:
                                   C = silu(gate) * (A @ B), R the gate)           */
#define VKG_MATMUL_B_F16 8u     /* B's elements are IEEE half floats (16 bits)      */
#define VKG_MATMUL_B_BF16 16u   /* B's elements are bfloat16 (16 bits); with either
                                   flag B's offset and strides count 16-bit
                                   elements, and the sums stay in f32            */

VKG_PARAMS_BEGIN(vkg_matmul_params)
    vkg_u32 M, N, K;
    vkg_u32 batch0, batch1;
    vkg_u32 a_offset, a_stride_m, a_stride_k, a_stride_b0, a_stride_b1;
    vkg_u32 b_offset, b_stride_k, b_stride_n, b_stride_b0, b_stride_b1;
    vkg_u32 c_offset, c_stride_m, c_stride_b0, c_stride_b1;
    vkg_u32 bias_offset;
    vkg_u32 r_offset, r_stride_m, r_stride_b0, r_stride_b1;
    vkg_u32 flags;
    vkg_u32 activation;       /* after the bias: an activation (params/unary_ops.def),
                                 or VKG_UNARY_COPY for none */
VKG_PARAMS_END(vkg_matmul_params)

#endif
