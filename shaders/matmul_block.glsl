// Storing an invocation's TM x TN block of sums through the matmul epilogue, for the texel
// shaders.  The sums are parked in shared memory (each invocation its own slice, so no barrier)
// and the epilogue runs in a loop that is not unrolled: the epilogue's code (an activation's exps above all)
// is then emitted once instead of TM * TN times, which on llvmpipe cuts the shader's compile time
// from seconds to a fraction.  Include after matmul_epilogue.glsl, TM and TN.
#ifndef VKG_MATMUL_BLOCK_GLSL
#define VKG_MATMUL_BLOCK_GLSL

shared float vkg_block[gl_WorkGroupSize.x * gl_WorkGroupSize.y * TM * TN];

uint vkg_block_base() {
    return gl_LocalInvocationIndex * TM * TN;
}

// Output (m0 + i, n0 + j) for every i < TM, j < TN inside C, from vkg_block[base + i * TN + j].
void vkg_block_store(uint b0, uint b1, uint m0, uint n0) {
    uint base = vkg_block_base();
    [[dont_unroll]] for (uint i = 0; i < TM; i++) {
        uint m = m0 + i;
        if (m >= p.M) break;
        [[dont_unroll]] for (uint j = 0; j < TN; j++) {
            uint n = n0 + j;
            if (n >= p.N) break;
            c_data[vkg_c_index(b0, b1, m, n)] = vkg_matmul_epilogue(vkg_block[base + i * TN + j], b0, b1, m, n);
        }
    }
}

#endif
