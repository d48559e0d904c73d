#version 460
#extension GL_GOOGLE_include_directive : require
// elementwise.add: y[i] = bf16(a[i] + b[i]), one element per invocation.
#include "common.glsl"

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= args.n) return;
  BF16 y = BF16(args.y), a = BF16(args.a), b = BF16(args.b);
  y.v[i] = f32_to_bf16(bf16_to_f32(a.v[i]) + bf16_to_f32(b.v[i]));
}
