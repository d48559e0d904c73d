#version 460
#extension GL_GOOGLE_include_directive : require
// gemm.gemv_bf16: the gemm_bf16 contract for small M (decode); see gemv_rows.glsl.
#include "common.glsl"
#define GEMV_OUT_F32 0
#include "gemv_rows.glsl"
