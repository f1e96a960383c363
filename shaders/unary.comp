#version 450
// out[i0, i1, i2, i3] = f(in[i0, i1, i2, i3]), both sides strided: copies that materialise views,
// concat parts and KV-cache writes (a decode step's rows each at its own position: dyn_rows), scale,
// the activations and the causal mask.  See params/unary.h.
#extension GL_GOOGLE_include_directive : require
#include "params/unary.h"
#include "common.glsl"

layout(local_size_x_id = VKG_SPEC_WG_X) in;
// p.op as a constant of the pipeline, so that its code holds the one op: with the op read from
// the push constants, llvmpipe spent more on the chain of ops than on the element (a KV-cache
// write of 393K elements took 2.3x as long).
layout(constant_id = VKG_SPEC_OP) const uint OP = 0u;

layout(std430, binding = 0) readonly buffer I { float x_in[]; };
layout(std430, binding = 1) writeonly buffer O { float x_out[]; };
layout(std430, binding = 2) readonly buffer X { int indices[]; };

void main() {
    uint total = p.shape[0] * p.shape[1] * p.shape[2] * p.shape[3];
    uint stride = vkg_group_count() * gl_WorkGroupSize.x;
    int dyn = p.dyn_index != VKG_NO_INDEX ? indices[p.dyn_index] : 0;
    // uint arithmetic wraps, so a negative dyn * stride still lands on the right element.
    uint out_base = p.out_offset + uint(dyn) * p.out_dyn_stride;
    const uvec4 shape = uvec4(p.shape[0], p.shape[1], p.shape[2], p.shape[3]), step = vkg_digits4(stride, shape);
    uint first = vkg_group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    uvec4 d = vkg_digits4(first, shape);
    for (uint i = first; i < total; i += stride, d = vkg_digits4_add(d, step, shape)) {
        uint i0 = d.x, i1 = d.y, i2 = d.z, i3 = d.w;
        float x = x_in[p.in_offset + i0 * p.in_strides[0] + i1 * p.in_strides[1] + i2 * p.in_strides[2] +
                       i3 * p.in_strides[3]];
        uint out_at = out_base;
        if (p.dyn_rows != 0u) out_at = p.out_offset + uint(indices[p.dyn_index + i0]) * p.out_dyn_stride;
        float v;
        if (OP == VKG_UNARY_SCALE) v = p.alpha * x;
        else if (OP == VKG_UNARY_CAUSAL) {
            int last = int(i2) + p.causal_offset + dyn;   // the query's position
            bool old = p.window != 0u && int(i3) <= last - int(p.window);
            v = int(i3) > last || old ? vkg_neg_inf() : x;
        }
        else v = vkg_activation(OP, x); // copy and the activations
        x_out[out_at + i0 * p.out_strides[0] + i1 * p.out_strides[1] + i2 * p.out_strides[2] +
              i3 * p.out_strides[3]] = v;
    }
}
