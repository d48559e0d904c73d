#version 460
#extension GL_GOOGLE_include_directive : require
// norm.rmsnorm: y[r,:] = bf16(x[r,:] * rsqrt(mean(x[r,:]^2) + eps) * (1 + w)); see
// rmsnorm_row.glsl.
#include "common.glsl"
#define RMSNORM_OUT_F32 0
#include "rmsnorm_row.glsl"
