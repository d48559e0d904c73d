#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.split_qkvzba35 (Qwen3.5 layout), one token per workgroup: p[t] = [q | k | v | z | b | a]
// with C = 2*nk*dk + nv*dv columns of q|k|v, then nv*dv of z, nv of b, nv of a.
#include "common.glsl"

void main() {
  uint tok = gl_WorkGroupID.x;
  if (tok >= args.t) return;
  uint nv = args.nv, dv = args.dv;
  uint C = 2u * args.nk * args.dk + nv * dv;
  uint zdim = nv * dv;
  uint width = C + zdim + 2u * nv;
  BF16 p = bf16_at(args.p, uint64_t(tok) * width);
  BF16 mixed = bf16_at(args.mixed, uint64_t(tok) * C);
  BF16 z = bf16_at(args.z, uint64_t(tok) * zdim);
  BF16 b = bf16_at(args.b, uint64_t(tok) * nv);
  BF16 a = bf16_at(args.a, uint64_t(tok) * nv);
  for (uint j = gl_LocalInvocationID.x; j < width; j += LOCAL_SIZE) {
    uint v = uint(p.v[j]);
    if (j < C) mixed.v[j] = uint16_t(v);
    else if (j < C + zdim) z.v[j - C] = uint16_t(v);
    else if (j < C + zdim + nv) b.v[j - C - zdim] = uint16_t(v);
    else a.v[j - C - zdim - nv] = uint16_t(v);
  }
}
