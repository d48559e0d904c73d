#version 460
#extension GL_GOOGLE_include_directive : require
// conv.conv1d_prefill: grid (ceil(C/256), S); sequence s covers tokens
// cu_seqlens[s] .. cu_seqlens[s+1]-1 and uses state slot slots[s].
#include "common.glsl"
#include "conv_seq.glsl"

void main() {
  uint c = gl_GlobalInvocationID.x, s = gl_WorkGroupID.y;
  if (c >= args.c || s >= args.s) return;
  I32 cu = I32(args.cu_seqlens), slots = I32(args.slots);
  int t0 = cu.v[s], t1 = cu.v[s + 1];
  if (t1 <= t0) return;  // an empty sequence changes nothing
  conv_seq(slots.v[s], uint(t0), uint(t1 - t0), c);
}
