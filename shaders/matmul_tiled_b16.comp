#version 450
// C = A @ B (+ epilogue) for GPUs, B of 16-bit elements (f16 or bf16).  See matmul_tiled.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#define B_STORAGE_16BIT
#include "matmul_b16.glsl"
#include "matmul_tiled.glsl"
