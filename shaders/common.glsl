// Helpers shared by every shader.  Include after the #version line.
#ifndef VKG_COMMON_GLSL
#define VKG_COMMON_GLSL

#include "params/activation.h"

// The specialization constants' ids by name (params/spec_constants.def): VKG_SPEC_<NAME>.
#define VKG_SPEC(NAME, id, type) const int VKG_SPEC_##NAME = id;
#include "params/spec_constants.def"

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

// Element-wise shaders walk a 4-d shape: each invocation splits its first flat index into
// digits (i0, i1, i2, i3) once, then adds the dispatch's stride, split the same way, with one carry
// per digit.  Dividing by the shape on every element would cost more than the element's work:
// llvmpipe runs a 32-bit division lane by lane (tens of cycles each), GPUs as a dozen
// instructions.  Each sum of two digits is below twice the digit's range, so one subtraction
// carries it; the leading digit is left to grow (the loop ends on the flat index).
uvec4 vkg_digits4(uint i, uvec4 shape) {
    uvec4 d;
    d.w = i % shape.w;
    i /= shape.w;
    d.z = i % shape.z;
    i /= shape.z;
    d.y = i % shape.y;
    d.x = i / shape.y;
    return d;
}

uvec4 vkg_digits4_add(uvec4 d, uvec4 step, uvec4 shape) {
    d.w += step.w;
    uint c = d.w >= shape.w ? 1u : 0u;
    d.w -= c * shape.w;
    d.z += step.z + c;
    c = d.z >= shape.z ? 1u : 0u;
    d.z -= c * shape.z;
    d.y += step.y + c;
    c = d.y >= shape.y ? 1u : 0u;
    d.y -= c * shape.y;
    d.x += step.x + c;
    return d;
}

float vkg_neg_inf() {
    return uintBitsToFloat(0xff800000u);
}

float vkg_nan() {
    return uintBitsToFloat(0x7fc00000u);
}

// The activations of params/unary_ops.def (the C kernels compute the same in src/cpu/kernels.h).

// 1 / (1 + exp(-z)): exp overflowing to +inf gives 0 and underflowing gives 1, never a NaN.
float vkg_sigmoid(float z) {
    return 1.0 / (1.0 + exp(-z));
}

// Phi(x), the normal CDF, for the exact GELU (GLSL has no erf).  With t = 1 / (1 + C |x|),
//   q = Phi(-|x|) = erfc(|x| / sqrt 2) / 2 = t/2 exp(-x^2 / 2) exp(P(t - T0)),
// P fitted by tools/fit_normal_cdf.py: relative error 1.4e-8 in exact arithmetic, 4.4e-7 at worst
// (5e-8 on average) evaluated in float32, and it keeps that accuracy in the far negative tail,
// where 1 + erf(x / sqrt 2) would cancel.  exp(-x^2 / 2) is taken as exp(-hi^2 / 2) with hi = |x|
// cut to 12 significant bits (so hi * hi is exact) times exp of the small rest: rounding x^2 in
// one piece would cost 1e-5 of relative accuracy at |x| = 10.
float vkg_normal_cdf(float x) {
    float ax = abs(x);
    float t = 1.0 / (1.0 + 0.5303300858899106 * ax);
    float w = t - 0.5593498494453464;
    float p = 0.32975369869560284;
    p = p * w - 0.26199742515066582;
    p = p * w - 0.18726417924761524;
    p = p * w + 0.36424280686443317;
    p = p * w - 0.1636776634201868;
    p = p * w - 0.16883586357886735;
    p = p * w + 0.34022576448325581;
    p = p * w - 0.13843086040985872;
    p = p * w - 0.41401734025333187;
    p = p * w + 0.86917682365398075;
    p = p * w - 0.300427621865762;
    float hi = uintBitsToFloat(floatBitsToUint(ax) & 0xfffff000u);
    float lo = ax - hi;
    float q = 0.5 * t * exp(-0.5 * hi * hi) * exp(p - 0.5 * lo * (ax + hi));
    // Past 14, q is below the smallest float (and at inf, lo = inf - inf would be NaN).  A NaN x
    // lands here too and gives Phi = 1: x * Phi keeps it NaN.
    q = ax < 14.0 ? q : 0.0;
    return x < 0.0 ? q : 1.0 - q;
}

// x * gate for a gate in [0, 1]: a gate of 0 (x far negative) gives -0, where x = -inf would give
// -inf * 0 = NaN.  The gate is tested as bits: Mesa's compiler folds `gate == 0.0 ? -0.0 : x * gate`
// into `x * gate`, the same for every finite x, and lavapipe then gives NaN at -inf.
float vkg_gated(float x, float gate) {
    return (floatBitsToUint(gate) << 1) == 0u ? uintBitsToFloat(0x80000000u) : x * gate;
}

// A quiet NaN: what a shader computes for an op code it does not know.  The host never sends
// one (the plan check refuses them), so a NaN there means a code added to a params/*.def table
// without its line in the shaders, which every test comparing values then sees.
float vkg_unknown_code() {
    return uintBitsToFloat(0x7fc00000u);
}

// The activation `op` (a VKG_UNARY_* activation code; VKG_UNARY_COPY leaves x as it is).  The
// sigmoid-gated ones share one sigmoid, so the epilogue's code stays small.  GLSL has no switch
// the compiler checks for completeness: a new row of params/unary_ops.def needs its line here,
// and without one its code gives NaN.
float vkg_activation(uint op, float x) {
    if (op == VKG_UNARY_COPY) return x;
    if (op == VKG_UNARY_RELU) return x > 0.0 ? x : 0.0; // NaN -> 0 on every driver (max(NaN, 0) is undefined in SPIR-V)
    if (op == VKG_UNARY_GELU_ERF) return vkg_gated(x, vkg_normal_cdf(x));
    float z;
    // 0.5 (1 + tanh(u)) = sigmoid(2 u): the tanh GELU without 1 + tanh(u) cancelling for u << 0
    if (op == VKG_UNARY_GELU) z = 1.5957691216057308 * (x + 0.044715 * x * x * x);
    else if (op == VKG_UNARY_QUICK_GELU) z = 1.702 * x;
    else if (op == VKG_UNARY_SILU) z = x;
    else return vkg_unknown_code();
    return vkg_gated(x, vkg_sigmoid(z));
}

#endif
