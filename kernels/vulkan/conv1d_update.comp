#version 460
#extension GL_GOOGLE_include_directive : require
// conv.conv1d_update: one decode token per slot, grid (ceil(C/256), B).
#include "common.glsl"
#include "conv_seq.glsl"

void main() {
  uint c = gl_GlobalInvocationID.x, b = gl_WorkGroupID.y;
  if (c >= args.c || b >= args.bsz) return;
  conv_seq(I32(args.slots).v[b], b, 1u, c);
}
