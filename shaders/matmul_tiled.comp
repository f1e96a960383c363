#version 450
// C = A @ B (+ epilogue) for GPUs, B of f32.  See matmul_tiled.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/matmul.h"
#include "common.glsl"
#include "matmul_tiled.glsl"
