#version 460
#extension GL_GOOGLE_include_directive : require
// moe.moe_combine, one token per workgroup:
//   out[t,:] = bf16( res[t,:] + sum_j w[t,j] * y[t*k+j,:] + sigmoid(gate[t*ld+col]) * shared[t,:] )
// (the shared-expert gate logit sits in column col of the router logits buffer).
#include "common.glsl"

void main() {
  uint tok = gl_WorkGroupID.x;
  if (tok >= args.t) return;
  uint K = args.k, H = args.h;
  BF16 res = bf16_at(args.res, uint64_t(tok) * H);
  BF16 sh = bf16_at(args.shared_, uint64_t(tok) * H);
  BF16 o = bf16_at(args.out_, uint64_t(tok) * H);
  F32 w = f32_at(args.w, uint64_t(tok) * K);
  float sg = sigmoid(f32_at(args.gate, uint64_t(tok) * args.ld).v[args.col]);
  for (uint i = gl_LocalInvocationID.x; i < H; i += LOCAL_SIZE) {
    float routed = 0.0;
    for (uint j = 0; j < K; j++) routed += w.v[j] * f32_at(args.y, (uint64_t(tok) * K + j) * H).v[i];
    o.v[i] = f32_to_bf16(bf16_to_f32(res.v[i]) + routed + sg * bf16_to_f32(sh.v[i]));
  }
}
