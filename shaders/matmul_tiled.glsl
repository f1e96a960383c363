// C = A @ B (+ epilogue) for GPUs: the workgroup stages a BM x BK slice of A and a BK x BN slice
// of B in shared memory (loads by consecutive invocations hit consecutive addresses when the
// operand is contiguous along the loaded axis), then each invocation accumulates a TM x TN block
// of C in registers.  Columns of an invocation's block are WG_X apart, so stores and shared reads
// of neighbouring invocations are contiguous.  See params/matmul.h.
// Include after params/matmul.h, common.glsl and, for 16-bit B, matmul_b16.glsl (which declares
// binding 1 and LOAD_B).
#ifndef VKG_MATMUL_TILED_GLSL
#define VKG_MATMUL_TILED_GLSL

layout(local_size_x_id = VKG_SPEC_WG_X, local_size_y_id = VKG_SPEC_WG_Y) in;
layout(constant_id = VKG_SPEC_TM) const uint TM = 4;
layout(constant_id = VKG_SPEC_TN) const uint TN = 4;
layout(constant_id = VKG_SPEC_BK) const uint BK = 16;
const uint WG_X = gl_WorkGroupSize.x;
const uint WG_Y = gl_WorkGroupSize.y;
const uint BM = WG_Y * TM;
const uint BN = WG_X * TN;

layout(std430, binding = 0) readonly buffer A { float a_data[]; };
#ifndef LOAD_B
layout(std430, binding = 1) readonly buffer B { float b_data[]; };
#define LOAD_B(i) b_data[i]
#endif
layout(std430, binding = 2) writeonly buffer C { float c_data[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias_data[]; };
layout(std430, binding = 4) readonly buffer R { float r_data[]; };
#include "matmul_epilogue.glsl"

shared float a_tile[BK * BM];   // [kk][r]
shared float b_tile[BK * BN];   // [kk][c]

void main() {
    uint b0 = gl_WorkGroupID.z / p.batch1, b1 = gl_WorkGroupID.z % p.batch1;
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint tid = ty * WG_X + tx, threads = WG_X * WG_Y;
    uint m_tile = gl_WorkGroupID.y * BM, n_tile = gl_WorkGroupID.x * BN;
    uint a_base = p.a_offset + b0 * p.a_stride_b0 + b1 * p.a_stride_b1;
    uint b_base = p.b_offset + b0 * p.b_stride_b0 + b1 * p.b_stride_b1;

    float acc[TM * TN];
    for (uint e = 0; e < TM * TN; e++) acc[e] = 0.0;
    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        for (uint e = tid; e < BM * BK; e += threads) {
            uint r = e / BK, kk = e % BK, m = m_tile + r, k = k0 + kk;
            a_tile[kk * BM + r] = (m < p.M && k < p.K) ? a_data[a_base + m * p.a_stride_m + k * p.a_stride_k] : 0.0;
        }
        for (uint e = tid; e < BK * BN; e += threads) {
            uint kk = e / BN, c = e % BN, n = n_tile + c, k = k0 + kk;
            b_tile[kk * BN + c] = (n < p.N && k < p.K) ? LOAD_B(b_base + k * p.b_stride_k + n * p.b_stride_n) : 0.0;
        }
        barrier();
        for (uint kk = 0; kk < BK; kk++) {
            float av[TM];
            float bv[TN];
            for (uint i = 0; i < TM; i++) av[i] = a_tile[kk * BM + ty * TM + i];
            for (uint j = 0; j < TN; j++) bv[j] = b_tile[kk * BN + tx + j * WG_X];
            for (uint i = 0; i < TM; i++)
                for (uint j = 0; j < TN; j++) acc[i * TN + j] = fma(av[i], bv[j], acc[i * TN + j]);
        }
        barrier();
    }

    for (uint i = 0; i < TM; i++) {
        uint m = m_tile + ty * TM + i;
        if (m >= p.M) break;
        for (uint j = 0; j < TN; j++) {
            uint n = n_tile + tx + j * WG_X;
            if (n < p.N) c_data[vkg_c_index(b0, b1, m, n)] = vkg_matmul_epilogue(acc[i * TN + j], b0, b1, m, n);
        }
    }
}

#endif
