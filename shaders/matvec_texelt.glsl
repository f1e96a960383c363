// C[b, 0, n] = sum_k A[b, 0, k] * B[b, n, k] (+ epilogue), the M == 1 matmul of decoding, with B
// read along k (b_stride_k == 1: y = W x for W held [N, K]), for devices whose fast reads are
// texel fetches (software rasterisers such as llvmpipe, which run each fetch as one load per
// SIMD lane: the cost is per fetch).  Every fetch of B brings one 16-byte texel, four floats
// (R32G32B32A32_SFLOAT) or eight 16-bit elements (B_TEXEL_16BIT_X8: R32G32B32A32_UINT, widened
// here).
//
// The lanes of a subgroup walk BLOCK_ROWS rows of B together along k, lane l of S taking texels
// l, l + S, l + 2S, ... of each row: one fetch across the lanes reads S consecutive texels of a
// row, and each lane's sums are added across the subgroup once, at the end of the rows.  The
// rows walked together are SPAN_BLOCKS rows apart: a subgroup takes a span of BLOCK_ROWS *
// SPAN_BLOCKS consecutive rows as SPAN_BLOCKS blocks, block i being rows i, i + SPAN_BLOCKS, ...
// of the span.  That puts the streams read at once in pages of their own: a CPU's prefetcher
// follows one stream per 4 KiB page, and GPT-2's rows of 768 are 1.5 KiB in f16.  Measured on
// llvmpipe (8 lanes, 2 threads) over 50 f16 [3072, 768] weights times one row: lanes owning rows
// of their own (matmul_texel4.glsl) 31 ms, lanes sharing rows next to each other 44 ms, sharing
// rows 8 apart 22 ms; over 25 such f32 weights 20.6 ms next to each other, 13.6 ms 8 apart.
//
// The workgroup must be whole subgroups (the host's tuning check asserts it: a partial subgroup
// would leave its missing lanes' texels unread).  It covers WG_SPANS spans, its subgroups taking
// them in turn, so any number of subgroups covers them all.  Every lane stays live to the end
// (the subgroup sums need them): rows past N read row N - 1 and are not stored.  The host picks
// this shader only where A is read along k in whole vec4s, B's offset and row stride are whole
// texels and K is a multiple of the texel's elements.
//
// Include after defining B_TEXEL_16BIT_X8 (and including matmul_b16.glsl) or not.
#ifndef VKG_MATVEC_TEXELT_GLSL
#define VKG_MATVEC_TEXELT_GLSL

#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x_id = VKG_SPEC_WG_X) in;
layout(constant_id = VKG_SPEC_BLOCK_ROWS) const uint BLOCK_ROWS = 8;    // rows walked together
layout(constant_id = VKG_SPEC_SPAN_BLOCKS) const uint SPAN_BLOCKS = 8;   // blocks per span: their rows this far apart
layout(constant_id = VKG_SPEC_WG_SPANS) const uint WG_SPANS = 2;      // spans per workgroup
const uint SPAN = BLOCK_ROWS * SPAN_BLOCKS;           // rows

#include "matvec_bindings.glsl"

void main() {
    const uint b0 = gl_WorkGroupID.z / p.batch1, b1 = gl_WorkGroupID.z % p.batch1;
    const uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    const int a_lane = int((p.a_offset + b0 * p.a_stride_b0 + b1 * p.a_stride_b1) / 4 + lane * V);
    const uint b_base = p.b_offset + b0 * p.b_stride_b0 + b1 * p.b_stride_b1;
    const uint texels = p.K / EPT;   // per row
    [[dont_unroll]] for (uint span = gl_SubgroupID; span < WG_SPANS; span += gl_NumSubgroups)
        [[dont_unroll]] for (uint i = 0; i < SPAN_BLOCKS; i++) {
            const uint first = (gl_WorkGroupID.x * WG_SPANS + span) * SPAN + i;   // row j: + j * SPAN_BLOCKS
            int at[BLOCK_ROWS];
            float sums[BLOCK_ROWS];
            [[unroll]] for (uint j = 0; j < BLOCK_ROWS; j++) {
                at[j] = int((b_base + min(first + j * SPAN_BLOCKS, p.N - 1) * p.b_stride_n) / EPT + lane);
                sums[j] = 0.0;
            }
            int a_at = a_lane;
            for (uint t = lane; t < texels; t += lanes) {
                vec4 x[V];
                [[unroll]] for (uint v = 0; v < V; v++) x[v] = texelFetch(A, a_at + int(v));
                a_at += int(lanes * V);
                [[unroll]] for (uint j = 0; j < BLOCK_ROWS; j++) {
                    vec4 y[V];
                    vkg_fetch_b(at[j], y);
                    at[j] += int(lanes);
                    float s = dot(x[0], y[0]);
                    [[unroll]] for (uint v = 1; v < V; v++) s += dot(x[v], y[v]);
                    sums[j] += s;
                }
            }
            [[unroll]] for (uint j = 0; j < BLOCK_ROWS; j++) sums[j] = subgroupAdd(sums[j]);
            // Lane l stores rows l, l + S, ... of the block, in a loop that is not unrolled: the
            // epilogue's code (an activation's exps above all) is emitted once.
            [[dont_unroll]] for (uint q = lane; q < BLOCK_ROWS; q += lanes) {
                float sum = 0.0;
                [[unroll]] for (uint j = 0; j < BLOCK_ROWS; j++) sum = j == q ? sums[j] : sum;
                uint n = first + q * SPAN_BLOCKS;
                if (n < p.N) c_data[vkg_c_index(b0, b1, 0, n)] = vkg_matmul_epilogue(sum, b0, b1, 0, n);
            }
        }
}

#endif
