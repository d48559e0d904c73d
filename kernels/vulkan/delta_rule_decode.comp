#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.delta_rule_decode: one token per slot, grid.x = B*nv (slot b, value head h).
#include "common.glsl"
#include "delta_seq.glsl"

void main() {
  uint nv = args.nv;
  uint gid = gl_WorkGroupID.x;
  if (nv == 0u || args.nk == 0u || args.nv < args.nk || gid >= args.bsz * nv) return;
  uint b = gid / nv, h = gid % nv;
  delta_seq(I32(args.slots).v[b], b, 1u, h);
}
