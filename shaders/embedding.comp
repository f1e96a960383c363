#version 450
// Embedding lookup from an f32 table.  See embedding.glsl.
#extension GL_GOOGLE_include_directive : require
#include "params/embedding.h"
#include "common.glsl"
#include "embedding.glsl"
