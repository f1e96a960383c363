#version 450
// M == 1 matmul reading A and B from storage buffers (GPUs), B of 16-bit elements.  See matvec.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"

layout(std430, binding = 0) readonly buffer A { float a_data[]; };
#define B_STORAGE_16BIT
#include "matmul_b16.glsl"
layout(std430, binding = 2) writeonly buffer C { float c_data[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias_data[]; };
layout(std430, binding = 4) readonly buffer R { float r_data[]; };
#include "matmul_epilogue.glsl"

#define LOAD_A(i) a_data[i]
#include "matvec.glsl"
