#version 450
// Fused attention through texel buffers of single floats: q, k and v with any strides.  See
// attention.glsl; attention4.comp is the same with four floats per fetch where the layout allows.
#extension GL_GOOGLE_include_directive : require
#include "params/attention.h"
#include "common.glsl"

layout(binding = 0) uniform samplerBuffer Q;
layout(binding = 1) uniform samplerBuffer K;
layout(binding = 2) uniform samplerBuffer V;
layout(std430, binding = 3) writeonly buffer O { float o_data[]; };
layout(std430, binding = 4) readonly buffer X { int indices[]; };

// Elements 4 d4 .. 4 d4 + 3 of the row at `row` (elements `stride` apart), zeros from len on.
#define VKG_LOAD4(buf, row, stride, d4, len)                                                     \
    vec4(4u * (d4) + 0u < (len) ? texelFetch(buf, int((row) + (4u * (d4) + 0u) * (stride))).x : 0.0, \
         4u * (d4) + 1u < (len) ? texelFetch(buf, int((row) + (4u * (d4) + 1u) * (stride))).x : 0.0, \
         4u * (d4) + 2u < (len) ? texelFetch(buf, int((row) + (4u * (d4) + 2u) * (stride))).x : 0.0, \
         4u * (d4) + 3u < (len) ? texelFetch(buf, int((row) + (4u * (d4) + 3u) * (stride))).x : 0.0)
#define LOAD_Q(row, d4) VKG_LOAD4(Q, row, p.q_stride_d, d4, p.D)
#define LOAD_K(row, d4) VKG_LOAD4(K, row, p.k_stride_d, d4, p.D)
#define LOAD_V(row, d4) VKG_LOAD4(V, row, p.v_stride_d, d4, p.Dv)
#include "attention.glsl"
