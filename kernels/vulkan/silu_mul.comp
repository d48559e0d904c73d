#version 460
#extension GL_GOOGLE_include_directive : require
// elementwise.silu_mul: y[r,i] = bf16(silu(gu[r,i]) * gu[r,n+i]), one row per workgroup.
#include "common.glsl"

void main() {
  uint r = gl_WorkGroupID.x;
  if (r >= args.rows) return;
  uint n = args.n;
  BF16 gu = bf16_at(args.gu, uint64_t(r) * n * 2u);
  BF16 y = bf16_at(args.y, uint64_t(r) * n);
  for (uint i = gl_LocalInvocationID.x; i < n; i += LOCAL_SIZE)
    y.v[i] = f32_to_bf16(silu(bf16_to_f32(gu.v[i])) * bf16_to_f32(gu.v[n + i]));
}
