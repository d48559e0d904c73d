#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.gates, one element per invocation (i < n = T*nv, h = i % nv):
//   g[i] = -exp(a_log[h]) * softplus(a[i] + dt_bias[h])   (softplus(x) = x when x > 20)
//   beta[i] = sigmoid(b[i])
// a, b f32; dt_bias bf16.
#include "common.glsl"
#include "gates.glsl"

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= args.n || args.nv == 0u) return;
  uint h = i % args.nv;
  BF16 dt_bias = BF16(args.dt_bias);
  F32 a = F32(args.a), b = F32(args.b), a_log = F32(args.a_log), g = F32(args.g), beta = F32(args.beta);
  g.v[i] = gate_g(a.v[i], a_log.v[h], bf16_to_f32(dt_bias.v[h]));
  beta.v[i] = sigmoid(b.v[i]);
}
