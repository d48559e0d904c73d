#version 460
#extension GL_GOOGLE_include_directive : require
// conv.conv1d_prefill: grid (ceil(C/256), S); sequence s covers tokens
// cu_seqlens[s] .. cu_seqlens[s+1]-1 and uses state slot slots[s].
//
// Where the driver caps a shader invocation's loop iterations (LOOP_CAP, set by the backend
// as for delta_rule_prefill), the grid is dispatched once for each window of tokens and
// workgroup layer z runs outputs [z win, (z + 1) win) of its sequence: the inputs come from
// x and the initial state as always, the final state is stored by the window that ends the
// sequence, which runs after the first (the only one that reads the initial state).
#include "common.glsl"
#include "conv_seq.glsl"

layout(constant_id = 0) const uint LOOP_CAP = 0u;

void main() {
  uint c = gl_GlobalInvocationID.x, s = gl_WorkGroupID.y;
  if (c >= args.c || s >= args.s) return;
  I32 cu = I32(args.cu_seqlens), slots = I32(args.slots);
  int t0 = cu.v[s], t1 = cu.v[s + 1];
  if (t1 <= t0) return;  // an empty sequence changes nothing
  uint len = uint(t1 - t0), first = 0u, n = len;
  if (LOOP_CAP != 0u) {
    // backends/vulkan/vk_internal.h vk_conv_window(), the same formula
    uint win = LOOP_CAP > 2u * args.kw + 2u ? (LOOP_CAP - args.kw) / (args.kw + 2u) : 1u;
    first = gl_WorkGroupID.z * win;
    if (first >= len) return;
    n = min(win, len - first);
  }
  conv_seq_range(slots.v[s], uint(t0), len, first, n, c);
}
