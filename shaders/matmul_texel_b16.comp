#version 450
// C = A @ B through texel buffers, any strides, B of 16-bit elements.  See matmul_texel.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#define B_TEXEL_16BIT
#include "matmul_b16.glsl"
#include "matmul_texel.glsl"
