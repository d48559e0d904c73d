#version 460
#extension GL_GOOGLE_include_directive : require
// norm.gated_rmsnorm: y = bf16( bf16(o * rsqrt(mean(o^2) + eps)) * w * silu(z) ), one row
// (token, value head) per workgroup; o, w, y bf16, z f32; w is used as is (no 1 + w).
#include "common.glsl"

void main() {
  uint r = gl_WorkGroupID.x;
  if (r >= args.rows) return;
  uint n = args.n, t = gl_LocalInvocationID.x;
  uint64_t row = uint64_t(r) * n;
  BF16 o = bf16_at(args.o, row), y = bf16_at(args.y, row);
  F32 z = f32_at(args.z, row);
  BF16 w = BF16(args.w);
  float ss = 0.0;
  for (uint i = t; i < n; i += LOCAL_SIZE) {
    float v = bf16_to_f32(o.v[i]);
    ss += v * v;
  }
  float inv = inversesqrt(block_sum(ss) / float(n) + args.eps);
  for (uint i = t; i < n; i += LOCAL_SIZE) {
    float normed = bf16_to_f32(f32_to_bf16(bf16_to_f32(o.v[i]) * inv));
    y.v[i] = f32_to_bf16(normed * bf16_to_f32(w.v[i]) * silu(z.v[i]));
  }
}
