#version 460
#extension GL_GOOGLE_include_directive : require
// gemm.gemv_bf16_f32: gemv_bf16 with y in f32 (the decode router logits); see
// gemv_rows.glsl.
#include "common.glsl"
#define GEMV_OUT_F32 1
#include "gemv_rows.glsl"
