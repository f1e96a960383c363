#version 450
// M == 1 matmul reading A and B from storage buffers (GPUs).  See matvec.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"

layout(std430, binding = 0) readonly buffer A { float a_data[]; };
layout(std430, binding = 1) readonly buffer B { float b_data[]; };
layout(std430, binding = 2) writeonly buffer C { float c_data[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias_data[]; };
layout(std430, binding = 4) readonly buffer R { float r_data[]; };
#include "matmul_epilogue.glsl"

#define LOAD_A(i) a_data[i]
#define LOAD_B(i) b_data[i]
#include "matvec.glsl"
