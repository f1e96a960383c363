#version 450
// out[r, :] = gamma * (in[r, :] - mean) / sqrt(var + eps) + beta, or with VKG_LAYERNORM_RMS
// gamma * in[r, :] / sqrt(mean(in^2) + eps), one workgroup per row at a time, computed as
// src/cpu/kernel_layernorm.c does (its comment says why each step): the row scaled by a power of
// two so that its largest magnitude lies in [0.5, 1) (norm_scale.glsl), sums of x a - x0 a (x0 the
// row's first element), then the biased variance in a second pass over the squared deviations
// from the mean.
// In place is safe: each invocation reads its own elements before writing them, and every read
// of the first three passes happens before the barriers of the reductions.
// See params/layernorm.h.
#extension GL_GOOGLE_include_directive : require
#include "params/layernorm.h"
#include "common.glsl"
#include "norm_scale.glsl"

layout(local_size_x_id = VKG_SPEC_WG_X) in;
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer I { float x_in[]; };
layout(std430, binding = 1) writeonly buffer O { float x_out[]; };
layout(std430, binding = 2) readonly buffer G { float gamma[]; };
layout(std430, binding = 3) readonly buffer Bt { float beta[]; };

void main() {
    uint tid = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
    if (p.cols == 0u) return;   // empty rows: nothing to write (uniform, before any barrier)
    // Rows r, r + groups, ...: the bounds are uniform over the workgroup, so barriers stay legal.
    for (uint r = vkg_group_index(); r < p.rows; r += vkg_group_count()) {
        uint row = p.in_offset + r * p.cols, out_row = p.out_offset + r * p.cols;
        float m = 0.0;
        for (uint j = tid; j < p.cols; j += step) m = max(m, abs(x_in[row + j]));
        int e = vkg_norm_exponent(vkg_workgroup_max(m));
        float a = vkg_pow2(-e);
        if ((p.flags & VKG_LAYERNORM_RMS) != 0u) {   // RMS norm: no mean, no beta
            precise float q = 0.0;
            for (uint j = tid; j < p.cols; j += step) {
                precise float xa = x_in[row + j] * a;
                q += xa * xa;
            }
            float rstd = vkg_norm_rstd(e, vkg_workgroup_sum(q) / float(p.cols), p.eps);
            for (uint j = tid; j < p.cols; j += step) {
                precise float v = (x_in[row + j] * a) * rstd;
                if ((p.flags & VKG_LAYERNORM_GAMMA) != 0u) v *= gamma[p.gamma_offset + j];
                x_out[out_row + j] = v;
            }
            continue;
        }
        float x0 = x_in[row] * a;
        // precise: the sums as written, neither reassociated nor contracted by the driver's
        // compiler ((x a - x0) - mean as x a - (x0 + mean) would round at the row's magnitude).
        precise float s = 0.0;
        for (uint j = tid; j < p.cols; j += step) s += x_in[row + j] * a - x0;
        precise float mean = vkg_workgroup_sum(s) / float(p.cols);   // of x a - x0
        precise float q = 0.0;
        for (uint j = tid; j < p.cols; j += step) {
            precise float d = (x_in[row + j] * a - x0) - mean;
            q += d * d;
        }
        float rstd = vkg_norm_rstd(e, vkg_workgroup_sum(q) / float(p.cols), p.eps);
        for (uint j = tid; j < p.cols; j += step) {
            precise float v = ((x_in[row + j] * a - x0) - mean) * rstd;
            if ((p.flags & VKG_LAYERNORM_GAMMA) != 0u) v *= gamma[p.gamma_offset + j];
            if ((p.flags & VKG_LAYERNORM_BETA) != 0u) v += beta[p.beta_offset + j];
            x_out[out_row + j] = v;
        }
    }
}
