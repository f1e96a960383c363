#version 450
// M == 1 matmul through texel buffers, B along n, four floats per fetch.  See matvec_texel.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#include "matvec_texel.glsl"
