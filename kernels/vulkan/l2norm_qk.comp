#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.l2norm_qk, in place, one head of one token per workgroup (grid.x = T*2*nk): the
// first 2*nk heads of width dk of row t (q heads, then k heads) become
// x * rsqrt(sum(x^2) + 1e-6), q heads further times dk^-1/2; x is f32 and stays unrounded.
#include "common.glsl"

void main() {
  uint nk = args.nk, dk = args.dk;
  uint heads = 2u * nk;
  uint g = gl_WorkGroupID.x;
  if (heads == 0u || g >= args.t * heads) return;
  uint tok = g / heads, head = g % heads;
  F32 x = f32_at(args.x, uint64_t(tok) * args.ld + uint64_t(head) * dk);
  uint t = gl_LocalInvocationID.x;
  float ss = 0.0;
  for (uint i = t; i < dk; i += LOCAL_SIZE) {
    float v = x.v[i];
    ss += v * v;
  }
  float inv = inversesqrt(block_sum(ss) + 1e-6);
  float scale = head < nk ? 1.0 / sqrt(float(dk)) : 1.0;
  for (uint i = t; i < dk; i += LOCAL_SIZE)
    x.v[i] = x.v[i] * inv * scale;
}
