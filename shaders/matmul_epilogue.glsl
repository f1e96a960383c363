// The matmul epilogue, in the order params/matmul.h states: + bias[n], then the activation, then + R
// (or times silu(R)).
// Include after declaring the storage buffers bias_data and r_data.
#ifndef VKG_MATMUL_EPILOGUE_GLSL
#define VKG_MATMUL_EPILOGUE_GLSL

// The step's p.flags (its epilogue bits) and p.activation as constants of the pipeline, so that
// its code holds the one epilogue, as unary.comp's holds the one op (on llvmpipe, GPT-2's
// matmuls at T = 256 took 5-8% less time than with the tests on the push constants).
layout(constant_id = VKG_SPEC_EPILOGUE) const uint EPILOGUE = 0u;
layout(constant_id = VKG_SPEC_ACTIVATION) const uint ACTIVATION = 0u;

// Element offsets of output (m, n) in C and in R for batch (b0, b1).
uint vkg_c_index(uint b0, uint b1, uint m, uint n) {
    return p.c_offset + b0 * p.c_stride_b0 + b1 * p.c_stride_b1 + m * p.c_stride_m + n;
}

float vkg_matmul_epilogue(float v, uint b0, uint b1, uint m, uint n) {
    if ((EPILOGUE & VKG_MATMUL_BIAS) != 0u) v += bias_data[p.bias_offset + n];
    v = vkg_activation(ACTIVATION, v);
    if ((EPILOGUE & VKG_MATMUL_RESIDUAL) != 0u) {
        float r = r_data[p.r_offset + b0 * p.r_stride_b0 + b1 * p.r_stride_b1 + m * p.r_stride_m + n];
        v = (EPILOGUE & VKG_MATMUL_GATE) != 0u ? vkg_activation(VKG_UNARY_SILU, r) * v : v + r;
    }
    return v;
}

#endif
