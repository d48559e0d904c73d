#version 460
#extension GL_GOOGLE_include_directive : require
// moe.moe_down: y[j, o] = w[idx[j], o, :] . act[j, :] in f32 for the 64 outputs o of block
// y of the grid (R, ceil(H/64)).  act bf16 [R, N], w bf16 [E, H, N], y f32 [R, H].
#include "common.glsl"
#include "rowdot.glsl"

void main() {
  uint j = gl_WorkGroupID.x, ob = gl_WorkGroupID.y * 64u;
  uint N = args.n, H = args.h;
  if (j >= args.r || ob >= H) return;
  int e = I32(args.idx).v[j];
  uint t = gl_LocalInvocationID.x, group = t / 32u, lane = t % 32u;
  uint64_t act = args.act + uint64_t(j) * N * 2ul;
  bool vec = N % 8u == 0u && args.act % 16ul == 0ul && args.w % 16ul == 0ul;
  float part[8];
  for (uint i = 0; i < 8; i++) {
    part[i] = 0.0;
    uint o = ob + group * 8u + i;
    if (o >= H || e < 0) continue;
    part[i] = rowdot_bf16(args.w + (uint64_t(e) * H + o) * N * 2ul, act, N, lane, vec);
  }
  float total = rowdot_reduce(part);
  if (t < 64u && ob + t < H) f32_at(args.y, uint64_t(j) * H).v[ob + t] = total;
}
