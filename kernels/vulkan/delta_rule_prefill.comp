#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.delta_rule_prefill: grid.x = S*nv (sequence s, value head h); sequence s covers
// tokens cu_seqlens[s] .. cu_seqlens[s+1]-1 and state slot slots[s].
#include "common.glsl"
#include "delta_seq.glsl"

void main() {
  uint nv = args.nv;
  uint gid = gl_WorkGroupID.x;
  if (nv == 0u || args.nk == 0u || args.nv < args.nk || gid >= args.s * nv) return;
  uint s = gid / nv, h = gid % nv;
  I32 cu = I32(args.cu_seqlens);
  int t0 = cu.v[s], t1 = cu.v[s + 1];
  if (t1 <= t0) return;  // an empty sequence leaves its state as it was
  delta_seq(I32(args.slots).v[s], uint(t0), uint(t1 - t0), h);
}
