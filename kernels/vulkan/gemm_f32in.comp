#version 460
#extension GL_GOOGLE_include_directive : require
// gemm.gemm_f32in: y f32 [M,N] = x f32 [M,K] . w bf16 [N,K]^T, all in f32 (x is not
// rounded: the mixer's input projection).
#include "common.glsl"
#define GEMM_IN_F32 1
#define GEMM_OUT_F32 1
#define TILE 64
#include "gemm_tile.glsl"
