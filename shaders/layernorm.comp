#version 450
// out[r, :] = gamma * (in[r, :] - mean) / sqrt(var + eps) + beta (or RMS norm: gamma * in[r, :] /
// sqrt(mean(in^2) + eps)), one workgroup per row at a
// time, with the biased variance computed in a second pass over (x - mean)^2 (no cancellation on
// large means).
// In place is safe: each invocation reads its own elements before writing them, and every read
// of the first two passes happens before the barriers of the reductions.
// See params/layernorm.h.
#extension GL_GOOGLE_include_directive : require
#include "params/layernorm.h"
#include "common.glsl"

layout(local_size_x_id = 0) in;
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer I { float x_in[]; };
layout(std430, binding = 1) writeonly buffer O { float x_out[]; };
layout(std430, binding = 2) readonly buffer G { float gamma[]; };
layout(std430, binding = 3) readonly buffer Bt { float beta[]; };

void main() {
    uint tid = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
    // Rows r, r + groups, ...: the bounds are uniform over the workgroup, so barriers stay legal.
    for (uint r = vkg_group_index(); r < p.rows; r += vkg_group_count()) {
        uint row = p.in_offset + r * p.cols, out_row = p.out_offset + r * p.cols;
        if ((p.flags & VKG_LAYERNORM_RMS) != 0u) {   // RMS norm: no mean, no beta
            float q = 0.0;
            for (uint j = tid; j < p.cols; j += step) q += x_in[row + j] * x_in[row + j];
            float rstd = 1.0 / sqrt(vkg_workgroup_sum(q) / float(p.cols) + p.eps);
            for (uint j = tid; j < p.cols; j += step) {
                float v = x_in[row + j] * rstd;
                if ((p.flags & VKG_LAYERNORM_GAMMA) != 0u) v *= gamma[p.gamma_offset + j];
                x_out[out_row + j] = v;
            }
            continue;
        }
        // Sums of x - x0 (x0 the row's first element) rather than of x: a row with a large mean
        // keeps the precision of its deviations (x - x0 is exact when x and x0 are close).
        float x0 = x_in[row];
        float s = 0.0;
        for (uint j = tid; j < p.cols; j += step) s += x_in[row + j] - x0;
        float mean = vkg_workgroup_sum(s) / float(p.cols);   // of x - x0
        float q = 0.0;
        for (uint j = tid; j < p.cols; j += step) {
            float d = (x_in[row + j] - x0) - mean;
            q += d * d;
        }
        float rstd = 1.0 / sqrt(vkg_workgroup_sum(q) / float(p.cols) + p.eps);
        for (uint j = tid; j < p.cols; j += step) {
            float v = ((x_in[row + j] - x0) - mean) * rstd;
            if ((p.flags & VKG_LAYERNORM_GAMMA) != 0u) v *= gamma[p.gamma_offset + j];
            if ((p.flags & VKG_LAYERNORM_BETA) != 0u) v += beta[p.beta_offset + j];
            x_out[out_row + j] = v;
        }
    }
}
