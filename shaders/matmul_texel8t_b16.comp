#version 450
// C = A @ B with A and B both along k, B of 16-bit elements (f16 or bf16), eight elements per
// 16-byte texel fetch.  See matmul_texel4.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#define B_ALONG_K
#define B_TEXEL_16BIT_X8
#include "matmul_b16.glsl"
#include "matmul_texel4.glsl"
