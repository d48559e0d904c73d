#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.gates, one element per invocation (i < n = T*nv, h = i % nv):
//   g[i] = -exp(a_log[h]) * softplus(a[i] + dt_bias[h])   (softplus(x) = x when x > 20)
//   beta[i] = sigmoid(b[i])
// a, b f32; dt_bias bf16.
#include "common.glsl"

// log(1 + u) for u >= 0, accurate in relative terms for small u (Vulkan's log() only
// promises an absolute error near 1): 2 atanh(u / (2 + u)) as a series below 0.5.
float log1p_pos(float u) {
  if (u > 0.5) return log(1.0 + u);
  float s = u / (2.0 + u);  // <= 0.2
  float s2 = s * s;
  return 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 +
                   s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0 + s2 * (1.0 / 13.0)))))));
}

float softplus(float x) { return x > 20.0 ? x : log1p_pos(exp(x)); }

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= args.n || args.nv == 0u) return;
  uint h = i % args.nv;
  BF16 dt_bias = BF16(args.dt_bias);
  F32 a = F32(args.a), b = F32(args.b), a_log = F32(args.a_log), g = F32(args.g), beta = F32(args.beta);
  float x = a.v[i] + bf16_to_f32(dt_bias.v[h]);
  g.v[i] = -exp(a_log.v[h]) * softplus(x);
  beta.v[i] = sigmoid(b.v[i]);
}
