#version 450
// Rotary position embedding, one invocation per output pair (i, i + D/2) of a row: it reads both
// inputs before writing both outputs, so in place is safe.  See params/rope.h.
#extension GL_GOOGLE_include_directive : require
#include "params/rope.h"
#include "common.glsl"

layout(local_size_x_id = VKG_SPEC_WG_X) in;

layout(std430, binding = 0) readonly buffer X { float x_in[]; };
layout(std430, binding = 1) readonly buffer C { float table[]; };
layout(std430, binding = 2) writeonly buffer O { float x_out[]; };
layout(std430, binding = 3) readonly buffer I { int indices[]; };
layout(std430, binding = 4) readonly buffer P { int positions[]; };

void main() {
    uint half_d = p.D / 2u;
    uint total = p.batch0 * p.batch1 * p.T * half_d;
    uint stride = vkg_group_count() * gl_WorkGroupSize.x;
    int base = p.pos_offset + (p.dyn_index != VKG_NO_INDEX ? indices[p.dyn_index] : 0);
    for (uint e = vkg_group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x; e < total; e += stride) {
        uint i = e % half_d, r = e / half_d;
        uint t = r % p.T, b = r / p.T, b1 = b % p.batch1, b0 = b / p.batch1;
        uint xr = p.x_offset + b0 * p.x_stride_b0 + b1 * p.x_stride_b1 + t * p.x_stride_t;
        uint o = p.out_offset + r * p.D;
        if (b1 >= p.rotated) {
            x_out[o + i] = x_in[xr + i * p.x_stride_d];
            x_out[o + i + half_d] = x_in[xr + (i + half_d) * p.x_stride_d];
            continue;
        }
        int pos = base + (p.row_positions != 0u ? positions[p.positions_offset + t] : int(t));
        if (pos < 0 || pos >= int(p.positions)) {   // no table row: NaN, never a stray read
            x_out[o + i] = vkg_nan();
            x_out[o + i + half_d] = vkg_nan();
            continue;
        }
        uint row = p.table_offset + uint(pos) * p.D;
        float c = table[row + i], s = table[row + half_d + i];
        float a = x_in[xr + i * p.x_stride_d], bb = x_in[xr + (i + half_d) * p.x_stride_d];
        x_out[o + i] = a * c - bb * s;
        x_out[o + i + half_d] = bb * c + a * s;
    }
}
