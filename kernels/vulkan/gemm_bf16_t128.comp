#version 460
#extension GL_GOOGLE_include_directive : require
// gemm.gemm_bf16_t128: gemm_bf16 (y bf16 [M,N] = x bf16 [M,K] . w bf16 [N,K]^T, f32 sums) on
// 128x128 output tiles; grid (ceil(N/128), ceil(M/128)).
#include "common.glsl"
#define GEMM_OUT_F32 0
#define TILE 128
#include "gemm_tile.glsl"
