#version 450
// M == 1 matmul through texel buffers, B along k of 16-bit elements (f16 or bf16), eight per fetch.
// See matvec_texelt.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#define B_TEXEL_16BIT_X8
#include "matmul_b16.glsl"
#include "matvec_texelt.glsl"
