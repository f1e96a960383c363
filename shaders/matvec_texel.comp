#version 450
// M == 1 matmul reading A and B through uniform texel buffers (software rasterisers).  See
// matvec.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"

layout(binding = 0) uniform samplerBuffer A;
layout(binding = 1) uniform samplerBuffer B;
layout(std430, binding = 2) writeonly buffer C { float c_data[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias_data[]; };
layout(std430, binding = 4) readonly buffer R { float r_data[]; };
#include "matmul_epilogue.glsl"

#define LOAD_A(i) texelFetch(A, int(i)).x
#define LOAD_B(i) texelFetch(B, int(i)).x
#include "matvec.glsl"
