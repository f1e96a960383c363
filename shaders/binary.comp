#version 450
// out[i0, i1, i2, i3] = a[..] op b[..], each invocation taking every (invocations in the
// dispatch)-th output element.  Operands are read
// through strides (0 broadcasts); out is contiguous.  See params/binary.h.
#extension GL_GOOGLE_include_directive : require
#include "params/binary.h"
#include "common.glsl"

layout(local_size_x_id = VKG_SPEC_WG_X) in;
// p.op as a constant of the pipeline, so that its code holds the one op: with the op read from
// the push constants, llvmpipe spent more on the chain of ops than on the element (a KV-cache
// write of 393K elements took 2.3x as long).
layout(constant_id = VKG_SPEC_OP) const uint OP = 0u;

layout(std430, binding = 0) readonly buffer A { float a[]; };
// Read as bits: the mask op tests b != 0 on the raw word, so an i32 mask and an f32 mask both work
// (an i32 1 is a denormal float that a GPU may flush to zero).
layout(std430, binding = 1) readonly buffer B { uint b_bits[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };

void main() {
    uint total = p.shape[0] * p.shape[1] * p.shape[2] * p.shape[3];
    uint stride = vkg_group_count() * gl_WorkGroupSize.x;
    const uvec4 shape = uvec4(p.shape[0], p.shape[1], p.shape[2], p.shape[3]), step = vkg_digits4(stride, shape);
    uint first = vkg_group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    uvec4 d = vkg_digits4(first, shape);
    for (uint i = first; i < total; i += stride, d = vkg_digits4_add(d, step, shape)) {
        uint i0 = d.x, i1 = d.y, i2 = d.z, i3 = d.w;
        float x = a[p.a_offset + i0 * p.a_strides[0] + i1 * p.a_strides[1] + i2 * p.a_strides[2] + i3 * p.a_strides[3]];
        uint yb = b_bits[p.b_offset + i0 * p.b_strides[0] + i1 * p.b_strides[1] + i2 * p.b_strides[2] +
                         i3 * p.b_strides[3]];
        float y = uintBitsToFloat(yb);
        float v;
        if (OP == VKG_BINARY_ADD) v = x + y;
        else if (OP == VKG_BINARY_MUL) v = x * y;
        else if (OP == VKG_BINARY_MASK) v = (yb & 0x7fffffffu) != 0u ? x : vkg_neg_inf();
        else if (OP == VKG_BINARY_SWIGLU) v = vkg_activation(VKG_UNARY_SILU, x) * y;
        else v = vkg_unknown_code();
        o[p.out_offset + i] = v;
    }
}
