// Fused attention (params/attention.h): one invocation per query row.  A workgroup takes WG
// consecutive rows of one batch entry (b0, b1), or with grouped-query attention of one b0 (its
// b1 heads one after another), so its invocations read the same key and value rows at each step
// of the walk: the same cache lines.  (Fetching each row once per subgroup and
// handing it on with subgroupBroadcast was measured slower on llvmpipe.)  Each
// invocation walks its visible keys once, keeping the online softmax (running max m, sum l, the
// output acc, rescaled when m grows) in registers; no [T, S] matrix is stored.
//
// With SPLIT_KEYS (the host's choice where a batch entry has fewer query rows than a subgroup
// has lanes: decoding, one row per head), a subgroup takes one query row instead, its lanes the
// keys l, l + S, l + 2S, ... (S lanes), each keeping an online softmax of its own; the lanes'
// states then merge (the largest max, every sum and output rescaled to it, added across the
// subgroup).  One decode row per invocation left 7 of llvmpipe's 8 lanes idle and walked the
// keys one by one.  The workgroup must be whole subgroups: one, or with grouped-query attention
// one per head of a group, so that a group's heads walk their shared keys together.
//
// With CHUNK_KEYS as well (the host's choice on a GPU, whose decode step would otherwise run one
// workgroup per key/value head), workgroup z of the dispatch walks keys [z CHUNK_KEYS, (z + 1)
// CHUNK_KEYS) only and, in place of the output row, writes its softmax state to the buffer bound
// as out: for query row r (its index in the dispatch's runs) and chunk z, at (r Z + z)(Dv + 2)
// the max m, the sum l, then the Dv sums of weighted values, none divided; a chunk with no visible
// key writes m = -inf, l = 0.  attention_merge.comp folds a row's chunks into its output.
//
// Include after declaring the bindings (Q, K, V, o_data, indices) and defining LOAD_Q(row, d4),
// LOAD_K(row, d4) and LOAD_V(row, d4): elements 4 d4 .. 4 d4 + 3 of the row that starts at
// element `row`, zeros past D (q, k) or Dv (v).  The loops over a row's vec4s have constant
// bounds and are unrolled, so the walk over the keys is the only loop that runs long (record.c
// sizes dispatches by it).
#ifndef VKG_ATTENTION_GLSL
#define VKG_ATTENTION_GLSL

#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require
#include "attention_rows.glsl"

layout(local_size_x_id = VKG_SPEC_WG_X) in;
layout(constant_id = VKG_SPEC_D4) const uint D4 = 16;    // vec4s of a q / k row: ceil(D / 4)
layout(constant_id = VKG_SPEC_DV4) const uint DV4 = 16;   // vec4s of a v / out row: ceil(Dv / 4)
layout(constant_id = VKG_SPEC_SPLIT_KEYS) const bool SPLIT_KEYS = false;   // a subgroup per query row (above)
layout(constant_id = VKG_SPEC_CHUNK_KEYS) const uint CHUNK_KEYS = 0u;     // with SPLIT_KEYS: keys per workgroup z

void main() {
    // Rows per unit: a workgroup's tile, or with SPLIT_KEYS one row per subgroup.
    uint rows = SPLIT_KEYS ? gl_NumSubgroups : gl_WorkGroupSize.x;
    uint lane = SPLIT_KEYS ? gl_SubgroupInvocationID : 0u, lanes = SPLIT_KEYS ? gl_SubgroupSize : 1u;
    // Runs of rows that share keys and values (attention_rows.glsl): with grouped-query
    // attention one unit holds the query heads of a key/value head (a decode step's G heads) and
    // reads it once.
    uint run = vkg_attention_run();
    uint tiles = (run + rows - 1u) / rows;       // units per run
    uint units = vkg_attention_runs() * tiles;
    for (uint u = vkg_group_index(); u < units; u += vkg_group_count()) {
        uint bb = u / tiles, tr = (u % tiles) * rows + (SPLIT_KEYS ? gl_SubgroupID : gl_LocalInvocationID.x);
        if (tr >= run) continue;
        uint b0, b1, t;
        vkg_attention_row(bb, tr, b0, b1, t);
        uint q_row = p.q_offset + b0 * p.q_stride_b0 + b1 * p.q_stride_b1 + t * p.q_stride_t;
        uint k_base = p.k_offset + b0 * p.k_stride_b0 + b1 * p.k_stride_b1;
        uint v_base = p.v_offset + b0 * p.v_stride_b0 + b1 * p.v_stride_b1;
        int dyn = p.dyn_index != VKG_NO_INDEX ? indices[p.dyn_index + ((p.mask_rows & VKG_MASK_ROWS_OWN_INDEX) != 0u ? b0 : 0u)] : 0;
        int keys = int(p.S), first = 0;   // the keys seen: first .. keys-1
        if (p.mask_kind == VKG_ATTENTION_MASK_CAUSAL) {
            int last = ((p.mask_rows & VKG_MASK_ROWS_ONE_POSITION) != 0u ? 0 : int(t)) + p.causal_offset + dyn;   // the query's position
            keys = clamp(last + 1, 0, int(p.S));
            if (p.window != 0u) first = clamp(last + 1 - int(p.window), 0, keys);
        }
        if (CHUNK_KEYS != 0u) {   // this workgroup's chunk of them
            int lo = int(gl_WorkGroupID.z * CHUNK_KEYS);
            first = max(first, lo);
            keys = min(keys, lo + int(CHUNK_KEYS));
        }

        vec4 q[D4];
        [[unroll]] for (uint d = 0; d < D4; d++) q[d] = LOAD_Q(q_row, d);
        vec4 acc[DV4];
        [[unroll]] for (uint d = 0; d < DV4; d++) acc[d] = vec4(0.0);
        float m = vkg_neg_inf(), l = 0.0;
        for (int j = first + int(lane); j < keys; j += int(lanes)) {
            uint k_row = k_base + uint(j) * p.k_stride_s, v_row = v_base + uint(j) * p.v_stride_s;
            float dot_qk = 0.0;
            [[unroll]] for (uint d = 0; d < D4; d++) dot_qk += dot(q[d], LOAD_K(k_row, d));
            float s = p.scale * dot_qk;
            if (s == vkg_neg_inf()) continue;   // weight exactly 0, as softmax gives it
            if (!(s <= m)) {                    // a new maximum (or NaN, which then stays)
                float corr = exp(m - s);
                l *= corr;
                [[unroll]] for (uint d = 0; d < DV4; d++) acc[d] *= corr;
                m = s;
            }
            float e = exp(s - m);
            l += e;
            [[unroll]] for (uint d = 0; d < DV4; d++) acc[d] += e * LOAD_V(v_row, d);
        }
        if (SPLIT_KEYS) {   // the lanes' softmax states as one: rescaled to the largest max
            float top = subgroupMax(m);
            float c = m == vkg_neg_inf() ? 0.0 : exp(m - top);   // a lane that saw no key adds 0
            l = subgroupAdd(l * c);
            [[unroll]] for (uint d = 0; d < DV4; d++) acc[d] = subgroupAdd(acc[d] * c);
            m = top;
            if (lane != 0u) continue;
        }
        if (CHUNK_KEYS != 0u) {   // the chunk's state, for attention_merge.comp
            uint at = ((bb * run + tr) * gl_NumWorkGroups.z + gl_WorkGroupID.z) * (p.Dv + 2u);
            o_data[at] = m;
            o_data[at + 1u] = l;
            [[unroll]] for (uint d = 0; d < DV4; d++)
                [[unroll]] for (uint e = 0; e < 4u; e++)
                    if (4u * d + e < p.Dv) o_data[at + 2u + 4u * d + e] = acc[d][e];
            continue;
        }

        float inv = l == 0.0 ? 0.0 : 1.0 / l;   // no visible key: zeros
        uint o_row = p.o_offset + b0 * p.o_stride_b0 + b1 * p.o_stride_b1 + t * p.o_stride_t;
        [[unroll]] for (uint d = 0; d < DV4; d++)
            [[unroll]] for (uint e = 0; e < 4u; e++)
                if (4u * d + e < p.Dv) o_data[o_row + (4u * d + e) * p.o_stride_d] = acc[d][e] * inv;
    }
}

#endif
