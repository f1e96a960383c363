#version 450
// Fused attention, four floats per texel fetch: q, k and v rows contiguous (unit stride along d),
// D and Dv multiples of 4, every other offset and stride a multiple of 4.  See attention.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/attention.h"
#include "common.glsl"

layout(binding = 0) uniform samplerBuffer Q;
layout(binding = 1) uniform samplerBuffer K;
layout(binding = 2) uniform samplerBuffer V;
layout(std430, binding = 3) writeonly buffer O { float o_data[]; };
layout(std430, binding = 4) readonly buffer X { int indices[]; };

#define LOAD_Q(row, d4) texelFetch(Q, int((row) / 4u + (d4)))
#define LOAD_K(row, d4) texelFetch(K, int((row) / 4u + (d4)))
#define LOAD_V(row, d4) texelFetch(V, int((row) / 4u + (d4)))
#include "attention.glsl"
