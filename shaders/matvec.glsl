// C[b, 0, n] = sum_k A[b, 0, k] * B[b, k, n] (+ epilogue): the M == 1 matmul of decoding.
// A workgroup computes COLS columns; its WG / COLS groups of invocations split the reduction over
// k (every WG/COLS-th k each) and combine through shared memory.  Include after defining
// LOAD_A(i) and LOAD_B(i) and declaring the bindings.
#ifndef VKG_MATVEC_GLSL
#define VKG_MATVEC_GLSL

layout(local_size_x_id = VKG_SPEC_WG_X) in;
layout(constant_id = VKG_SPEC_COLS) const uint COLS = 64;

shared float vkg_split[gl_WorkGroupSize.x];

void main() {
    const uint KS = gl_WorkGroupSize.x / COLS;
    uint t = gl_LocalInvocationID.x, c = t % COLS, s = t / COLS;
    uint n = gl_WorkGroupID.x * COLS + c;
    uint b0 = gl_WorkGroupID.z / p.batch1, b1 = gl_WorkGroupID.z % p.batch1;
    float sum = 0.0;
    if (n < p.N) {
        uint ai = p.a_offset + b0 * p.a_stride_b0 + b1 * p.a_stride_b1 + s * p.a_stride_k;
        uint bi = p.b_offset + b0 * p.b_stride_b0 + b1 * p.b_stride_b1 + n * p.b_stride_n + s * p.b_stride_k;
        uint a_step = KS * p.a_stride_k, b_step = KS * p.b_stride_k;
        for (uint k = s; k < p.K; k += KS) {
            sum = fma(LOAD_A(ai), LOAD_B(bi), sum);
            ai += a_step;
            bi += b_step;
        }
    }
    if (KS > 1) {
        vkg_split[t] = sum;
        barrier();
        if (s == 0)
            for (uint q = 1; q < KS; q++) sum += vkg_split[q * COLS + c];
    }
    if (s == 0 && n < p.N) c_data[vkg_c_index(b0, b1, 0, n)] = vkg_matmul_epilogue(sum, b0, b1, 0, n);
}

#endif
