#version 450
// C = A @ B with A read along k and B along n, four floats per texel fetch.  See matmul_texel4.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#include "matmul_texel4.glsl"
