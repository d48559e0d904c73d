#version 460
#extension GL_GOOGLE_include_directive : require
// moe.moe_down_sorted: for each slot (e, p, m) of tiles, y[j, :] = w[e] . act[j, :] in f32
// for the rows j = perm[p .. p+m); act bf16 [R, N], w bf16 [E, H, N], y f32 [R, H].
// grid (S, ceil(H/128)).
#include "common.glsl"
#define MOE_GATE_UP 0
#include "moe_tile.glsl"
