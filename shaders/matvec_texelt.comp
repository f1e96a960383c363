#version 450
// M == 1 matmul through texel buffers, B along k, four floats per fetch.  See matvec_texelt.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#include "matvec_texelt.glsl"
