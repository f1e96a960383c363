#version 450
// Embedding lookup from a table of 16-bit elements (f16 or bf16).  See embedding.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/embedding.h"
#include "common.glsl"
#define B_STORAGE_16BIT
#include "matmul_b16.glsl"
#include "embedding.glsl"
