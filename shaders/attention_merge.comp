#version 450
// The second dispatch of a decode step whose keys were split over workgroups (attention.glsl,
// CHUNK_KEYS): each query row's CHUNKS softmax states, read from binding 0 where attention.glsl
// wrote them, rescaled to their largest max and summed (a chunk that saw no key adds nothing),
// then divided into the row's output as the undivided walk does.  One invocation per output
// element; rows numbered as attention.glsl numbers them (attention_rows.glsl).
#extension GL_GOOGLE_include_directive : require
#include "params/attention.h"
#include "common.glsl"
#include "attention_rows.glsl"

layout(local_size_x_id = VKG_SPEC_WG_X) in;
layout(constant_id = VKG_SPEC_CHUNKS) const uint CHUNKS = 2u;

layout(std430, binding = 0) readonly buffer P { float states[]; };
layout(std430, binding = 3) writeonly buffer O { float o_data[]; };

void main() {
    uint run = vkg_attention_run(), rows = vkg_attention_runs() * run;
    uint width = p.Dv + 2u, n = rows * p.Dv;
    uint stride = vkg_group_count() * gl_WorkGroupSize.x;
    for (uint i = vkg_group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x; i < n; i += stride) {
        uint r = i / p.Dv, d = i % p.Dv, at = r * CHUNKS * width;
        float top = vkg_neg_inf();
        for (uint z = 0u; z < CHUNKS; z++) top = max(top, states[at + z * width]);
        float l = 0.0, acc = 0.0;
        for (uint z = 0u; z < CHUNKS; z++) {
            float m = states[at + z * width];
            float c = m == vkg_neg_inf() ? 0.0 : exp(m - top);
            l += states[at + z * width + 1u] * c;
            acc += states[at + z * width + 2u + d] * c;
        }
        uint b0, b1, t;
        vkg_attention_row(r / run, r % run, b0, b1, t);
        uint o_row = p.o_offset + b0 * p.o_stride_b0 + b1 * p.o_stride_b1 + t * p.o_stride_t;
        float inv = l == 0.0 ? 0.0 : 1.0 / l;   // no visible key: zeros
        o_data[o_row + d * p.o_stride_d] = acc * inv;
    }
}
