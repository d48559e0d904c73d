#version 460
#extension GL_GOOGLE_include_directive : require
// gemm.gemm_f32in_t128: gemm_f32in (y f32 [M,N] = x f32 [M,K] . w bf16 [N,K]^T, x not
// rounded) on 128x128 output tiles; grid (ceil(N/128), ceil(M/128)).
#include "common.glsl"
#define GEMM_IN_F32 1
#define GEMM_OUT_F32 1
#define TILE 128
#include "gemm_tile.glsl"
