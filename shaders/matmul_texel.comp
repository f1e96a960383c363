#version 450
// C = A @ B through texel buffers of single floats, any strides.  See matmul_texel.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#include "matmul_texel.glsl"
