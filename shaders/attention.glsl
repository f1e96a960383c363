// Fused attention (params/attention.h): one workgroup per query row at a time, its WG invocations
// splitting the row's keys (invocation i takes keys i, i + WG, ...).  Each keeps the online
// softmax of its keys (running max m, sum l, output acc rescaled when m grows) in registers; the
// workgroup then merges them: M = max m_i, L = sum l_i e^(m_i - M), out = sum acc_i e^(m_i - M) / L.
// No [T, S] matrix is stored.  Include after declaring the bindings (Q, K, V, o_data, indices)
// and defining LOAD_Q(row, d4), LOAD_K(row, d4) and LOAD_V(row, d4): elements 4 d4 .. 4 d4 + 3
// of the row that starts at element `row`, zeros past D (q, k) or Dv (v).
#ifndef VKG_ATTENTION_GLSL
#define VKG_ATTENTION_GLSL

#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint D4 = 16;    // vec4s of a q / k row: ceil(D / 4)
layout(constant_id = 2) const uint DV4 = 16;   // vec4s of a v / out row: ceil(Dv / 4)
#include "reduce.glsl"

void main() {
    uint tid = gl_LocalInvocationID.x, WG = gl_WorkGroupSize.x;
    int dyn = p.dyn_index != VKG_NO_INDEX ? indices[p.dyn_index] : 0;
    uint rows = p.batch0 * p.batch1 * p.T;
    // Rows r, r + groups, ...: the bounds are uniform over the workgroup, so barriers stay legal.
    for (uint r = vkg_group_index(); r < rows; r += vkg_group_count()) {
        uint t = r % p.T, b1 = (r / p.T) % p.batch1, b0 = r / (p.T * p.batch1);
        uint q_row = p.q_offset + b0 * p.q_stride_b0 + b1 * p.q_stride_b1 + t * p.q_stride_t;
        uint k_base = p.k_offset + b0 * p.k_stride_b0 + b1 * p.k_stride_b1;
        uint v_base = p.v_offset + b0 * p.v_stride_b0 + b1 * p.v_stride_b1;
        int keys = int(p.S);
        if (p.mask_kind == VKG_ATTENTION_MASK_CAUSAL) keys = clamp(int(t) + p.causal_offset + dyn + 1, 0, int(p.S));

        vec4 q[D4];
        [[unroll]] for (uint d = 0; d < D4; d++) q[d] = LOAD_Q(q_row, d);
        vec4 acc[DV4];
        [[unroll]] for (uint d = 0; d < DV4; d++) acc[d] = vec4(0.0);
        float m = vkg_neg_inf(), l = 0.0;
        for (uint j = tid; j < uint(keys); j += WG) {
            uint k_row = k_base + j * p.k_stride_s, v_row = v_base + j * p.v_stride_s;
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

        float M = vkg_workgroup_max(m);
        float f = m == vkg_neg_inf() ? 0.0 : exp(m - M);   // an invocation without keys adds nothing
        float L = vkg_workgroup_sum(l * f);
        float inv = L == 0.0 ? 0.0 : 1.0 / L;               // no visible key: zeros
        uint o_row = p.o_offset + b0 * p.o_stride_b0 + b1 * p.o_stride_b1 + t * p.o_stride_t;
        [[unroll]] for (uint d = 0; d < DV4; d++) {
            vec4 a = acc[d] * f;
            vec4 total = vec4(vkg_workgroup_sum(a.x), vkg_workgroup_sum(a.y), vkg_workgroup_sum(a.z),
                              vkg_workgroup_sum(a.w));
            if (tid == d % WG)   // the row's writes spread over the invocations
                for (uint e = 0; e < 4u && 4u * d + e < p.Dv; e++) o_data[o_row + (4u * d + e) * p.o_stride_d] = total[e] * inv;
        }
    }
}

#endif
