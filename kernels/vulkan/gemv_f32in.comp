#version 460
#extension GL_GOOGLE_include_directive : require
// gemm.gemv_f32in: the gemm_f32in contract (x f32, y f32) for small M (the decode input
// projection); see gemv_rows.glsl.
#include "common.glsl"
#define GEMV_IN_F32 1
#define GEMV_OUT_F32 1
#include "gemv_rows.glsl"
