// Helpers shared by every shader.  Include after the #version line.
#ifndef VKG_COMMON_GLSL
#define VKG_COMMON_GLSL

// The linear workgroup index of a dispatch laid out over x and y (the host splits a count larger
// than maxComputeWorkGroupCount[0] over two dimensions).
uint vkg_group_index() {
    return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
}

// Workgroups in the dispatch.  Element-wise and row shaders loop with this stride, so the host may
// dispatch fewer workgroups than there is work (llvmpipe pays ~20 us per workgroup).
uint vkg_group_count() {
    return gl_NumWorkGroups.x * gl_NumWorkGroups.y;
}

float vkg_neg_inf() {
    return uintBitsToFloat(0xff800000u);
}

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// tanh(u) = 1 - 2 / (exp(2u) + 1) stays finite for any u: exp overflowing to +inf gives 1,
// exp underflowing to 0 gives -1 (a library tanh written as a quotient of exps gives NaN there).
float vkg_gelu(float x) {
    float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    float t = 1.0 - 2.0 / (exp(2.0 * u) + 1.0);
    return 0.5 * x * (1.0 + t);
}

#endif
