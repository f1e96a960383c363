// The bindings of the M == 1 texel shaders (matvec_texel.glsl, matvec_texelt.glsl): A as vec4
// texels; B as 16-byte texels, four floats (R32G32B32A32_SFLOAT) or, with B_TEXEL_16BIT_X8
// (matmul_b16.glsl included first), eight 16-bit elements (R32G32B32A32_UINT) widened here; C,
// the bias and R, with the matmul epilogue.
#ifndef VKG_MATVEC_BINDINGS_GLSL
#define VKG_MATVEC_BINDINGS_GLSL

layout(binding = 0) uniform samplerBuffer A;
#ifdef B_TEXEL_16BIT_X8
const uint EPT = 8;   // elements per texel of B
void vkg_widen_b(uvec4 h, out vec4 v[2]) { vkg_widen16x8(h, v); }
#else
layout(binding = 1) uniform samplerBuffer B;
const uint EPT = 4;
void vkg_widen_b(vec4 t, out vec4 v[1]) { v[0] = t; }
#endif
const uint V = EPT / 4;   // vec4s per texel of B
// Texel i of B as elements.
void vkg_fetch_b(int i, out vec4 v[V]) { vkg_widen_b(texelFetch(B, i), v); }

layout(std430, binding = 2) writeonly buffer C { float c_data[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias_data[]; };
layout(std430, binding = 4) readonly buffer R { float r_data[]; };
#include "matmul_epilogue.glsl"

#endif
