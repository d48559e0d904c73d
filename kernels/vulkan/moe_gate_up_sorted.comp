#version 460
#extension GL_GOOGLE_include_directive : require
// moe.moe_gate_up_sorted: for each slot (e, p, m) of tiles, gu[j, :] = bf16(w[e] . x[j / k])
// for the rows j = perm[p .. p+m); x bf16 [R/k, H], w bf16 [E, N, H], gu bf16 [R, N].
// grid (S, ceil(N/128)).
#include "common.glsl"
#define MOE_GATE_UP 1
#include "moe_tile.glsl"
