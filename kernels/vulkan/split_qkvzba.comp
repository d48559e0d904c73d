#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.split_qkvzba (Qwen3-Next layout), one token per workgroup.  The projection row
// p[t] = [nk x (q dk | k dk | v r*dv | z r*dv)] ++ [nk x (b r | a r)], r = nv / nk, is
// scattered to mixed = [q | k | v] (C = 2*nk*dk + nv*dv), z [nv*dv], b [nv], a [nv].
// Everything is f32, copied bit for bit.
#include "common.glsl"

void main() {
  uint tok = gl_WorkGroupID.x;
  if (tok >= args.t) return;
  uint nk = args.nk, nv = args.nv, dk = args.dk, dv = args.dv;
  if (nk == 0u) return;
  uint r = nv / nk;
  uint head = 2u * dk + 2u * r * dv; // one key head's share of qkvz
  uint qkvz = nk * head;
  uint width = qkvz + 2u * nv;
  uint C = 2u * nk * dk + nv * dv;
  U32 p = u32_at(args.p, uint64_t(tok) * width);
  U32 mixed = u32_at(args.mixed, uint64_t(tok) * C);
  U32 z = u32_at(args.z, uint64_t(tok) * nv * dv);
  U32 b = u32_at(args.b, uint64_t(tok) * nv);
  U32 a = u32_at(args.a, uint64_t(tok) * nv);
  for (uint j = gl_LocalInvocationID.x; j < width; j += LOCAL_SIZE) {
    uint v = p.v[j];
    if (j < qkvz) {
      uint g = j / head, o = j % head;
      if (o < dk) mixed.v[g * dk + o] = v;
      else if (o < 2u * dk) mixed.v[nk * dk + g * dk + (o - dk)] = v;
      else if (o < 2u * dk + r * dv) mixed.v[2u * nk * dk + g * r * dv + (o - 2u * dk)] = v;
      else z.v[g * r * dv + (o - 2u * dk - r * dv)] = v;
    } else {
      uint jb = j - qkvz;
      uint g = jb / (2u * r), o = jb % (2u * r);
      if (o < r) b.v[g * r + o] = v;
      else a.v[g * r + (o - r)] = v;
    }
  }
}
