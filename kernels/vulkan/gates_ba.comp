#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.gates_ba: gdn.gates with b and a side by side in each token's row of ba [T, 2nv]
// (one GEMM over in_proj's b and a rows), one element per invocation (i = t*nv + h < n):
//   g[i] = -exp(a_log[h]) * softplus(ba[t*2nv + nv + h] + dt_bias[h]),  beta[i] = sigmoid(ba[t*2nv + h])
#include "common.glsl"
#include "gates.glsl"

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= args.n || args.nv == 0u) return;
  uint t = i / args.nv, h = i % args.nv;
  BF16 dt_bias = BF16(args.dt_bias);
  F32 ba = F32(args.ba), a_log = F32(args.a_log), g = F32(args.g), beta = F32(args.beta);
  uint row = t * 2u * args.nv;
  g.v[i] = gate_g(ba.v[row + args.nv + h], a_log.v[h], bf16_to_f32(dt_bias.v[h]));
  beta.v[i] = sigmoid(ba.v[row + h]);
}
