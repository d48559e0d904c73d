#version 460
#extension GL_GOOGLE_include_directive : require
// norm.rmsnorm_f32: rmsnorm with y f32, not rounded (the mixer's input); see rmsnorm_row.glsl.
#include "common.glsl"
#define RMSNORM_OUT_F32 1
#include "rmsnorm_row.glsl"
