#version 460
#extension GL_GOOGLE_include_directive : require
// norm.add_rmsnorm: h = bf16(a + b); y = bf16(h * rsqrt(mean(h^2) + eps) * (1 + w)),
// from the rounded h.  The second pass reads h back (not a + b again) so that h may
// alias a or b.
#include "common.glsl"

void main() {
  uint r = gl_WorkGroupID.x;
  if (r >= args.rows) return;
  uint n = args.n, t = gl_LocalInvocationID.x;
  uint64_t row = uint64_t(r) * n;
  BF16 a = bf16_at(args.a, row), b = bf16_at(args.b, row);
  BF16 h = bf16_at(args.h, row), y = bf16_at(args.y, row);
  BF16 w = BF16(args.w);
  float ss = 0.0;
  for (uint i = t; i < n; i += LOCAL_SIZE) {
    uint hv = bf16_bits(bf16_to_f32(a.v[i]) + bf16_to_f32(b.v[i]));
    h.v[i] = uint16_t(hv);
    float v = bf16_to_f32(hv);
    ss += v * v;
  }
  float inv = inversesqrt(block_sum(ss) / float(n) + args.eps);
  for (uint i = t; i < n; i += LOCAL_SIZE)
    y.v[i] = f32_to_bf16(bf16_to_f32(h.v[i]) * inv * (1.0 + bf16_to_f32(w.v[i])));
}
