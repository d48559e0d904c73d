#version 460
#extension GL_GOOGLE_include_directive : require
// gemm.gemm_bf16_f32: as gemm_bf16 with y in f32 (router logits).
#include "common.glsl"
#define GEMM_OUT_F32 1
#define TILE 64
#include "gemm_tile.glsl"
