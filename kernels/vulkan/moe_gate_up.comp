#version 460
#extension GL_GOOGLE_include_directive : require
// moe.moe_gate_up: routed row j (< R = T*k) reads token j / k and expert e = idx[j];
// gu[j, n] = bf16(w[e, n, :] . x[j / k, :]) for the 64 outputs n of block y of the grid
// (R, ceil(N/64)).  w bf16 [E, N, H].
#include "common.glsl"
#include "rowdot.glsl"

void main() {
  uint j = gl_WorkGroupID.x, nb = gl_WorkGroupID.y * 64u;
  uint N = args.n, H = args.h;
  if (j >= args.r || nb >= N || args.k == 0u) return;
  int e = I32(args.idx).v[j];
  uint t = gl_LocalInvocationID.x, group = t / 32u, lane = t % 32u;
  uint64_t x = args.x + uint64_t(j / args.k) * H * 2ul;
  bool vec = H % 8u == 0u && args.x % 16ul == 0ul && args.w % 16ul == 0ul;
  float part[8];
  for (uint i = 0; i < 8; i++) {
    part[i] = 0.0;
    uint n = nb + group * 8u + i;
    if (n >= N || e < 0) continue;
    part[i] = rowdot_bf16(args.w + (uint64_t(e) * N + n) * H * 2ul, x, H, lane, vec);
  }
  float total = rowdot_reduce(part);
  if (t < 64u && nb + t < N) bf16_at(args.gu, uint64_t(j) * N).v[nb + t] = f32_to_bf16(total);
}
