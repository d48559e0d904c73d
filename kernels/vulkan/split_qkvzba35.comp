#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.split_qkvzba35 (Qwen3.5 layout), one token per workgroup: p[t] = [q | k | v | z | b | a]
// with C = 2*nk*dk + nv*dv columns of q|k|v, then nv*dv of z, nv of b, nv of a.  Everything
// is f32, copied bit for bit.
#include "common.glsl"

void main() {
  uint tok = gl_WorkGroupID.x;
  if (tok >= args.t) return;
  uint nv = args.nv, dv = args.dv;
  uint C = 2u * args.nk * args.dk + nv * dv;
  uint zdim = nv * dv;
  uint width = C + zdim + 2u * nv;
  U32 p = u32_at(args.p, uint64_t(tok) * width);
  U32 mixed = u32_at(args.mixed, uint64_t(tok) * C);
  U32 z = u32_at(args.z, uint64_t(tok) * zdim);
  U32 b = u32_at(args.b, uint64_t(tok) * nv);
  U32 a = u32_at(args.a, uint64_t(tok) * nv);
  for (uint j = gl_LocalInvocationID.x; j < width; j += LOCAL_SIZE) {
    uint v = p.v[j];
    if (j < C) mixed.v[j] = v;
    else if (j < C + zdim) z.v[j - C] = v;
    else if (j < C + zdim + nv) b.v[j - C - zdim] = v;
    else a.v[j - C - zdim - nv] = v;
  }
}
