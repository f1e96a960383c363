#version 450
// Row softmax with the attention prologue fused in, one workgroup per row at a time:
//   out[r, j] = softmax_j(scale * in[r, j], masked)
// Rows r = (i0, i1, i2) of a contiguous [d0, dim1, dim2, cols] tensor.  A blocked entry gets
// weight exactly 0; a row with every entry blocked gives zeros.  See params/softmax.h.
#extension GL_GOOGLE_include_directive : require
#include "params/softmax.h"
#include "common.glsl"

layout(local_size_x_id = VKG_SPEC_WG_X) in;
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer I { float x_in[]; };
layout(std430, binding = 1) writeonly buffer O { float x_out[]; };
layout(std430, binding = 2) readonly buffer M { uint mask_bits[]; };   // f32 or i32, read raw
layout(std430, binding = 3) readonly buffer X { int indices[]; };

uint g_in, g_mask;    // start of this row in the input, and of its mask row
int g_limit;          // causal: the last column a row may see

// The masked, scaled score of column j; -inf when blocked.
float score(uint j) {
    float s = p.scale * x_in[g_in + j];
    if (p.mask_kind == VKG_SOFTMAX_MASK_CAUSAL) {
        if (int(j) > g_limit || (p.window != 0u && int(j) <= g_limit - int(p.window))) s = vkg_neg_inf();
    } else if (p.mask_kind == VKG_SOFTMAX_MASK_BOOL) {
        if ((mask_bits[g_mask + j * p.mask_strides[3]] & 0x7fffffffu) == 0u) s = vkg_neg_inf();
    } else if (p.mask_kind == VKG_SOFTMAX_MASK_ADDITIVE) {
        s += uintBitsToFloat(mask_bits[g_mask + j * p.mask_strides[3]]);
    } else if (p.mask_kind != VKG_SOFTMAX_MASK_NONE) {
        s = vkg_unknown_code();
    }
    return s;
}

void main() {
    uint tid = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
    // Rows r, r + groups, ...: the bounds are uniform over the workgroup, so barriers stay legal.
    for (uint r = vkg_group_index(); r < p.rows; r += vkg_group_count()) {
        uint i2 = r % p.dim2, i1 = (r / p.dim2) % p.dim1, i0 = r / (p.dim1 * p.dim2);
        g_in = p.in_offset + r * p.cols;
        g_mask = p.mask_offset + i0 * p.mask_strides[0] + i1 * p.mask_strides[1] + i2 * p.mask_strides[2];
        int dyn = p.dyn_index != VKG_NO_INDEX ? indices[p.dyn_index + ((p.mask_rows & VKG_MASK_ROWS_OWN_INDEX) != 0u ? i0 : 0u)] : 0;
        g_limit = ((p.mask_rows & VKG_MASK_ROWS_ONE_POSITION) != 0u ? 0 : int(i2)) + p.causal_offset + dyn;
        uint out_row = p.out_offset + r * p.cols;

        float m = vkg_neg_inf();
        for (uint j = tid; j < p.cols; j += step) m = max(m, score(j));
        m = vkg_workgroup_max(m);
        if (m == vkg_neg_inf()) {   // every entry blocked
            for (uint j = tid; j < p.cols; j += step) x_out[out_row + j] = 0.0;
            continue;
        }
        float sum = 0.0;
        for (uint j = tid; j < p.cols; j += step) {
            float s = score(j);
            sum += s == vkg_neg_inf() ? 0.0 : exp(s - m);
        }
        float inv = 1.0 / vkg_workgroup_sum(sum);
        for (uint j = tid; j < p.cols; j += step) {
            float s = score(j);
            x_out[out_row + j] = s == vkg_neg_inf() ? 0.0 : exp(s - m) * inv;
        }
    }
}
