#version 460
#extension GL_GOOGLE_include_directive : require
// gemm.gemm_bf16: y[m,n] = bf16(sum_k x[m,k] * w[n,k]); grid (ceil(N/64), ceil(M/64)).
#include "common.glsl"
#define GEMM_OUT_F32 0
#define TILE 64
#include "gemm_tile.glsl"
