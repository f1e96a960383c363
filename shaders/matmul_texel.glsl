// C = A @ B (+ epilogue) through uniform texel buffers of single floats, for operands whose
// strides or offsets rule out the vec4 shaders (matmul_texel4*.comp): any strides at all.  No
// shared memory; each invocation keeps a TM x TN block of C in registers.  See params/matmul.h.
//
// Workgroup (WG_X, WG_Y) covers a (WG_Y*TM) x (WG_X*TN) tile of C; gl_WorkGroupID.z is the batch.
// Include after params/matmul.h, common.glsl and, for 16-bit B, matmul_b16.glsl (which declares
// binding 1 and FETCH_B).
#ifndef VKG_MATMUL_TEXEL_GLSL
#define VKG_MATMUL_TEXEL_GLSL
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = VKG_SPEC_WG_X, local_size_y_id = VKG_SPEC_WG_Y) in;
layout(constant_id = VKG_SPEC_TM) const uint TM = 4;
layout(constant_id = VKG_SPEC_TN) const uint TN = 4;

layout(binding = 0) uniform samplerBuffer A;
#ifndef FETCH_B
layout(binding = 1) uniform samplerBuffer B;
#define FETCH_B(i) texelFetch(B, i).x
#endif
layout(std430, binding = 2) writeonly buffer C { float c_data[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias_data[]; };
layout(std430, binding = 4) readonly buffer R { float r_data[]; };
#include "matmul_epilogue.glsl"
#include "matmul_block.glsl"

void main() {
    uint b0 = gl_WorkGroupID.z / p.batch1, b1 = gl_WorkGroupID.z % p.batch1;
    uint m0 = (gl_WorkGroupID.y * gl_WorkGroupSize.y + gl_LocalInvocationID.y) * TM;
    uint n0 = (gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x) * TN;
    if (m0 >= p.M || n0 >= p.N) return;
    uint a_base = p.a_offset + b0 * p.a_stride_b0 + b1 * p.a_stride_b1;
    uint b_base = p.b_offset + b0 * p.b_stride_b0 + b1 * p.b_stride_b1;

    // Rows and columns past the edge read the last valid one (never out of bounds) and are not
    // stored.
    uint a_at[TM];
    uint b_at[TN];
    [[unroll]] for (uint i = 0; i < TM; i++) a_at[i] = a_base + min(m0 + i, p.M - 1) * p.a_stride_m;
    [[unroll]] for (uint j = 0; j < TN; j++) b_at[j] = b_base + min(n0 + j, p.N - 1) * p.b_stride_n;

    float acc[TM * TN];
    [[unroll]] for (uint e = 0; e < TM * TN; e++) acc[e] = 0.0;
    for (uint k = 0; k < p.K; k++) {
        float av[TM];
        float bv[TN];
        for (uint i = 0; i < TM; i++) av[i] = texelFetch(A, int(a_at[i])).x;
        for (uint j = 0; j < TN; j++) bv[j] = FETCH_B(int(b_at[j]));
        for (uint i = 0; i < TM; i++) {
            a_at[i] += p.a_stride_k;
            for (uint j = 0; j < TN; j++) acc[i * TN + j] = fma(av[i], bv[j], acc[i * TN + j]);
        }
        [[unroll]] for (uint j = 0; j < TN; j++) b_at[j] += p.b_stride_k;
    }

    uint base = vkg_block_base();
    [[unroll]] for (uint e = 0; e < TM * TN; e++) vkg_block[base + e] = acc[e];
    vkg_block_store(b0, b1, m0, n0);
}

#endif
