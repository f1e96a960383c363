// C[b, m, n] = sum_k A[b, m, k] * B[b, k, n] (+ epilogue) for the ROWS = M rows of a decoding
// step (1, or one per sequence of a batch: every fetch of B serves all of them), with B
// read along n (b_stride_n == 1: GPT-2's [K, N] Conv1D weights), for devices whose fast reads are
// texel fetches (software rasterisers such as llvmpipe, which run each load as one gather across
// the SIMD lanes: the cost is per fetch, not per byte).  Every fetch of B brings one 16-byte
// texel, four floats (R32G32B32A32_SFLOAT) or eight 16-bit elements (B_TEXEL_16BIT_X8:
// R32G32B32A32_UINT, widened here), and x[k] comes from one vec4 fetch of A per four rows.
// An invocation owns COL_TEXELS texels of columns next to each other, and the invocations of a slice own
// the texels next to theirs, so a SIMD batch reads consecutive bytes of each row.
//
// A workgroup's SPLIT groups of WG / SPLIT invocations take consecutive slices of k and add their
// sums through shared memory.  The host picks this shader only when the offsets and b_stride_k
// are whole texels and A is read along k in whole vec4s; views are rounded up to whole texels,
// rows past K (a partial vec4 of A at the end of k) are selected away and never multiplied, and
// columns past N are clamped onto the last texel and not stored.  Each row's sum is formed in the
// same order whatever ROWS is, so a row's result does not depend on the rows batched with it.
//
// Include after defining B_TEXEL_16BIT_X8 (and including matmul_b16.glsl) or not.
#ifndef VKG_MATVEC_TEXEL_GLSL
#define VKG_MATVEC_TEXEL_GLSL

#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = VKG_SPEC_WG_X) in;
layout(constant_id = VKG_SPEC_SPLIT) const uint SPLIT = 1;   // groups of invocations splitting k
layout(constant_id = VKG_SPEC_COL_TEXELS) const uint COL_TEXELS = 1;      // texels of columns per invocation
layout(constant_id = VKG_SPEC_SYNC) const bool SYNC = false; // a barrier after every block of four rows (below)
layout(constant_id = VKG_SPEC_ROWS) const uint ROWS = 1;     // rows of A and C (M)

#include "matvec_bindings.glsl"

const uint LANES = gl_WorkGroupSize.x / SPLIT;   // invocations per slice of k
const uint OUT = COL_TEXELS * EPT;   // outputs per invocation and row
const uint ACC = COL_TEXELS * V;     // vec4 accumulators per row
shared float vkg_part[gl_WorkGroupSize.x * OUT * ROWS];

void main() {
    const uint t = gl_LocalInvocationID.x, c = t % LANES, s = t / LANES;
    const uint b0 = gl_WorkGroupID.z / p.batch1, b1 = gl_WorkGroupID.z % p.batch1;
    const int a_base = int((p.a_offset + b0 * p.a_stride_b0 + b1 * p.a_stride_b1) / 4);
    const int a_row = int(p.a_stride_m / 4);   // vec4s from one row of A to the next (M > 1)
    const uint b_base = p.b_offset + b0 * p.b_stride_b0 + b1 * p.b_stride_b1;
    const uint first = (gl_WorkGroupID.x * LANES + c) * COL_TEXELS;   // its first texel of columns
    // k in blocks of four rows (one vec4 of A); this slice's blocks [kb0, kb1), the last one
    // partial where K % 4 != 0.
    const uint nt = (p.N + EPT - 1) / EPT, kbs = (p.K + 3) / 4, per = (kbs + SPLIT - 1) / SPLIT;
    const uint kb0 = min(s * per, kbs), kb1 = min(kb0 + per, kbs), kfull = clamp(p.K / 4, kb0, kb1);
    const int step = int(p.b_stride_k / EPT);
    int col[COL_TEXELS];
    [[unroll]] for (uint j = 0; j < COL_TEXELS; j++) col[j] = int(b_base / EPT + min(first + j, nt - 1));
    vec4 acc[ROWS * ACC];
    [[unroll]] for (uint e = 0; e < ROWS * ACC; e++) acc[e] = vec4(0.0);
    int row = int(kb0 * 4) * step;
    // With SYNC, the workgroup's invocations meet at a barrier after every block of rows.  A
    // software rasteriser runs a workgroup's SIMD batches one after another up to a barrier, and
    // one batch touches few bytes of each row before going on to the next row, too few for the
    // CPU's prefetcher to follow; meeting after each block, the batches of a slice sweep the same
    // rows one after another, across the workgroup's whole span of columns.  Every slice then
    // runs as many iterations (`per`), those past its last full block doing nothing.
    const uint iters = SYNC ? per : kfull - kb0;
    for (uint i = 0; i < iters; i++) {
        uint kb = kb0 + i;
        if (!SYNC || kb < kfull) {
            vec4 x[ROWS];
            [[unroll]] for (uint m = 0; m < ROWS; m++) x[m] = texelFetch(A, a_base + int(m) * a_row + int(kb));
            [[unroll]] for (uint q = 0; q < 4; q++)
                [[unroll]] for (uint j = 0; j < COL_TEXELS; j++) {
                    vec4 y[V];
                    vkg_fetch_b(row + int(q) * step + col[j], y);
                    [[unroll]] for (uint m = 0; m < ROWS; m++)
                        [[unroll]] for (uint v = 0; v < V; v++) acc[m * ACC + j * V + v] += x[m][q] * y[v];
                }
            row += 4 * step;
        }
        if (SYNC) barrier();
    }
    if (kfull < kb1) {   // rows 4 kfull .. K - 1; rows past K read row K - 1 and count as 0
        const bvec4 in_k = lessThan(uvec4(kfull * 4) + uvec4(0, 1, 2, 3), uvec4(p.K));
        vec4 x[ROWS];
        [[unroll]] for (uint m = 0; m < ROWS; m++)
            x[m] = mix(vec4(0.0), texelFetch(A, a_base + int(m) * a_row + int(kfull)), in_k);
        [[unroll]] for (uint q = 0; q < 4; q++) {
            bool live = kfull * 4 + q < p.K;
            int r = int(min(kfull * 4 + q, p.K - 1)) * step;
            [[unroll]] for (uint j = 0; j < COL_TEXELS; j++) {
                vec4 y[V];
                vkg_fetch_b(r + col[j], y);
                [[unroll]] for (uint m = 0; m < ROWS; m++)
                    [[unroll]] for (uint v = 0; v < V; v++)
                        acc[m * ACC + j * V + v] += x[m][q] * (live ? y[v] : vec4(0.0));
            }
        }
    }

    // Park the sums in shared memory: the slices' sums meet there, and the store below runs as a
    // loop that is not unrolled (the epilogue's code, an activation's exps above all, is emitted
    // once instead of OUT times).
    [[unroll]] for (uint e = 0; e < ROWS * OUT; e++) vkg_part[t * ROWS * OUT + e] = acc[e / 4][e % 4];
    if (SPLIT > 1) barrier();
    if (s != 0) return;
    [[dont_unroll]] for (uint m = 0; m < ROWS; m++)
        [[dont_unroll]] for (uint e = 0; e < OUT; e++) {
            uint n = first * EPT + e;
            if (n >= p.N) break;
            float sum = vkg_part[(c * ROWS + m) * OUT + e];
            [[dont_unroll]] for (uint q = 1; q < SPLIT; q++) sum += vkg_part[((q * LANES + c) * ROWS + m) * OUT + e];
            c_data[vkg_c_index(b0, b1, m, n)] = vkg_matmul_epilogue(sum, b0, b1, m, n);
        }
}

#endif
