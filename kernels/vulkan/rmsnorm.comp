#version 460
#extension GL_GOOGLE_include_directive : require
// norm.rmsnorm: y[r,:] = bf16(x[r,:] * rsqrt(mean(x[r,:]^2) + eps) * (1 + w)), one row per
// workgroup.  x and y may be the same buffer: each element is read and written by one
// invocation, and all reads of the sum happen before the reduction's barrier.
#include "common.glsl"

void main() {
  uint r = gl_WorkGroupID.x;
  if (r >= args.rows) return;  // uniform over the workgroup
  uint n = args.n, t = gl_LocalInvocationID.x;
  BF16 x = bf16_at(args.x, uint64_t(r) * n);
  BF16 y = bf16_at(args.y, uint64_t(r) * n);
  BF16 w = BF16(args.w);
  float ss = 0.0;
  for (uint i = t; i < n; i += LOCAL_SIZE) {
    float v = bf16_to_f32(x.v[i]);
    ss += v * v;
  }
  float inv = inversesqrt(block_sum(ss) / float(n) + args.eps);
  for (uint i = t; i < n; i += LOCAL_SIZE)
    y.v[i] = f32_to_bf16(bf16_to_f32(x.v[i]) * inv * (1.0 + bf16_to_f32(w.v[i])));
}
