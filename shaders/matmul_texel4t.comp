#version 450
// C = A @ B with A and B both read along k (B transposed in memory: x @ W^T, q @ k^T), four
// floats per texel fetch.  See matmul_texel4.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#define B_ALONG_K
#include "matmul_texel4.glsl"
