// C = A @ B (+ epilogue) through uniform texel buffers viewed as vec4 (R32G32B32A32_SFLOAT):
// one fetch brings four consecutive floats.  This is the fast path where texel fetches are the
// fast way to read memory (software rasterisers such as llvmpipe, whose storage-buffer and
// shared-memory loads are slow): no shared memory, each invocation keeps a TM x TN block of C in
// registers and reads per four steps of k TM vec4s of A and TN vec4s of B (4 * TM * TN
// multiply-adds).
//
// A is read along k (a_stride_k == 1).  B is read along n (B_ALONG_K undefined: b_stride_n == 1)
// or along k (B_ALONG_K defined: b_stride_k == 1, the "B transposed" of x @ W^T and q @ k^T).
// The host picks these shaders only when the strides that step in vec4s and every offset are
// multiples of 4 and TN is a multiple of 4.  Views are rounded up to whole vec4s, so any vec4
// holding an element of the operand is inside its view; a partial vec4 at the end of k has its
// extra lanes selected away (never multiplied: they may hold anything), and columns or rows past
// N or M are clamped onto the last valid one and not stored.
//
// B of 16-bit elements (matmul_b16.glsl included first) is read four elements per texel as well
// (B_TEXEL_16BIT: offsets and strides count its elements, so the same positions / 4 name its
// texels), or eight per 16-byte texel (B_TEXEL_16BIT_X8: R32G32B32A32_UINT, positions / 8), which
// halves the fetches of B where the fetch, not the byte, is the cost.  The host picks the latter
// only when B's strides that step in texels and its offset are multiples of 8, TN is a multiple
// of 8 and, for B along k, K is a multiple of 8 (no partial texel at the end of k).
//
// Workgroup (WG_X, WG_Y) covers a (WG_Y*TM) x (WG_X*TN) tile of C; gl_WorkGroupID.z is the batch.
#ifndef VKG_MATMUL_TEXEL4_GLSL
#define VKG_MATMUL_TEXEL4_GLSL

#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = VKG_SPEC_WG_X, local_size_y_id = VKG_SPEC_WG_Y) in;
layout(constant_id = VKG_SPEC_TM) const uint TM = 8;
layout(constant_id = VKG_SPEC_TN) const uint TN = 8;
const uint CV = TN / 4;   // vec4s of columns per invocation

layout(binding = 0) uniform samplerBuffer A;
#ifdef B_TEXEL_16BIT_X8
void vkg_fetch_b8(int i, out vec4 v[2]) { vkg_widen16x8(texelFetch(B, i), v); }
#elif !defined(FETCH_B4)
layout(binding = 1) uniform samplerBuffer B;
#define FETCH_B4(i) texelFetch(B, i)
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
    // Positions in vec4s.
    int a_at[TM];
    [[unroll]] for (uint i = 0; i < TM; i++)
        a_at[i] = int((p.a_offset + b0 * p.a_stride_b0 + b1 * p.a_stride_b1 + min(m0 + i, p.M - 1) * p.a_stride_m) / 4);
    uint b_base = p.b_offset + b0 * p.b_stride_b0 + b1 * p.b_stride_b1;
    uint K4 = p.K & ~3u;
    bvec4 tail = lessThan(uvec4(K4) + uvec4(0, 1, 2, 3), uvec4(p.K));   // live lanes of the last vec4

#if defined(B_ALONG_K) && defined(B_TEXEL_16BIT_X8)
    // K % 8 == 0: every texel of B and both vec4s of A beside it are whole.
    int b_at[TN];
    [[unroll]] for (uint j = 0; j < TN; j++) b_at[j] = int((b_base + min(n0 + j, p.N - 1) * p.b_stride_n) / 8);
    float acc[TM * TN];
    [[unroll]] for (uint e = 0; e < TM * TN; e++) acc[e] = 0.0;
    for (uint k = 0; k < p.K; k += 8) {
        vec4 y[2 * TN];
        [[unroll]] for (uint j = 0; j < TN; j++) {
            vec4 v[2];
            vkg_fetch_b8(b_at[j], v);
            y[2 * j] = v[0], y[2 * j + 1] = v[1];
            b_at[j] += 1;
        }
        [[unroll]] for (uint i = 0; i < TM; i++) {
            vec4 x0 = texelFetch(A, a_at[i]), x1 = texelFetch(A, a_at[i] + 1);
            a_at[i] += 2;
            [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] += dot(x0, y[2 * j]) + dot(x1, y[2 * j + 1]);
        }
    }
#define ACC(i, j) acc[(i) * TN + (j)]
#elif defined(B_ALONG_K)
    int b_at[TN];
    [[unroll]] for (uint j = 0; j < TN; j++) b_at[j] = int((b_base + min(n0 + j, p.N - 1) * p.b_stride_n) / 4);
    float acc[TM * TN];
    [[unroll]] for (uint e = 0; e < TM * TN; e++) acc[e] = 0.0;
    for (uint k = 0; k < p.K; k += 4) {
        bool full = k < K4;
        vec4 y[TN];
        [[unroll]] for (uint j = 0; j < TN; j++) {
            vec4 v = FETCH_B4(b_at[j]);
            y[j] = full ? v : mix(vec4(0.0), v, tail);
            b_at[j] += 1;
        }
        [[unroll]] for (uint i = 0; i < TM; i++) {
            vec4 x = texelFetch(A, a_at[i]);
            x = full ? x : mix(vec4(0.0), x, tail);
            a_at[i] += 1;
            [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] += dot(x, y[j]);
        }
    }
#define ACC(i, j) acc[(i) * TN + (j)]
#else
#ifdef B_TEXEL_16BIT_X8
    // The texels of eight columns of this invocation, clamped onto the one holding column N - 1.
    int col8[CV / 2];
    [[unroll]] for (uint j = 0; j < CV / 2; j++) col8[j] = int(min(n0 / 8 + j, (p.N - 1) / 8));
    int row = int(b_base / 8), row_step = int(p.b_stride_k / 8);
#else
    // The vec4 columns of this invocation, clamped onto the one holding column N - 1.
    int col[CV];
    [[unroll]] for (uint j = 0; j < CV; j++) col[j] = int(min(n0 / 4 + j, (p.N - 1) / 4));
    int row = int(b_base / 4), row_step = int(p.b_stride_k / 4);
#endif
    vec4 acc[TM * CV];
    [[unroll]] for (uint e = 0; e < TM * CV; e++) acc[e] = vec4(0.0);
    for (uint k = 0; k < p.K; k += 4) {
        bool full = k < K4;
        uint q_last = full ? 3u : p.K - 1u - k;   // rows past K read row K - 1, then count as 0
        vec4 y[4 * CV];
#ifdef B_TEXEL_16BIT_X8
        [[unroll]] for (uint q = 0; q < 4; q++)
            [[unroll]] for (uint j = 0; j < CV / 2; j++) {
                vec4 v[2];
                vkg_fetch_b8(row + int(min(q, q_last)) * row_step + col8[j], v);
                y[q * CV + 2 * j] = q <= q_last ? v[0] : vec4(0.0);
                y[q * CV + 2 * j + 1] = q <= q_last ? v[1] : vec4(0.0);
            }
#else
        [[unroll]] for (uint q = 0; q < 4; q++)
            [[unroll]] for (uint j = 0; j < CV; j++) {
                vec4 v = FETCH_B4(row + int(min(q, q_last)) * row_step + col[j]);
                y[q * CV + j] = q <= q_last ? v : vec4(0.0);
            }
#endif
        [[unroll]] for (uint i = 0; i < TM; i++) {
            vec4 x = texelFetch(A, a_at[i]);
            x = full ? x : mix(vec4(0.0), x, tail);
            a_at[i] += 1;
            [[unroll]] for (uint j = 0; j < CV; j++)
                acc[i * CV + j] += x.x * y[j] + x.y * y[CV + j] + x.z * y[2 * CV + j] + x.w * y[3 * CV + j];
        }
        row += 4 * row_step;
    }
#define ACC(i, j) acc[(i) * CV + (j) / 4][(j) % 4]
#endif

    uint base = vkg_block_base();
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++) vkg_block[base + i * TN + j] = ACC(i, j);
    vkg_block_store(b0, b1, m0, n0);
}

#endif
