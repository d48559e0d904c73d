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
  BF16 act = bf16_at(args.act, uint64_t(j) * N);
  float part[8];
  for (uint i = 0; i < 8; i++) {
    part[i] = 0.0;
    uint o = ob + group * 8u + i;
    if (o >= H || e < 0) continue;
    BF16 w = bf16_at(args.w, (uint64_t(e) * H + o) * N);
    for (uint n = lane; n < N; n += 32u) part[i] += bf16_to_f32(w.v[n]) * bf16_to_f32(act.v[n]);
  }
  float total = rowdot_reduce(part);
  if (t < 64u && ob + t < H) f32_at(args.y, uint64_t(j) * H).v[ob + t] = total;
}
