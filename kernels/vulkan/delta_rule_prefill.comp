#version 460
#extension GL_GOOGLE_include_directive : require
// gdn.delta_rule_prefill: grid.x = S*nv (sequence s, value head h); sequence s covers
// tokens cu_seqlens[s] .. cu_seqlens[s+1]-1 and state slot slots[s].
//
// Where the driver caps a shader invocation's loop iterations (llvmpipe: 65535 in all,
// counted over every loop), the backend sets LOOP_CAP and dispatches the grid once for each
// window of tokens: workgroup row y runs tokens [y win, (y + 1) win) of its sequence,
// starting from the state the window before stored in the slot (a padding sequence, slot
// -1, restarts from zero each window on such a driver).  Elsewhere LOOP_CAP is 0 and one
// dispatch runs every sequence whole.
#include "common.glsl"
#include "delta_seq.glsl"

layout(constant_id = 0) const uint LOOP_CAP = 0u;

// tokens a window holds: backends/vulkan/vk_internal.h vk_delta_window(), the same formula
uint window_tokens(uint dk, uint dv) {
  uint passes = (dv + LOCAL_SIZE - 1u) / LOCAL_SIZE;
  uint per_pass = LOOP_CAP / max(passes, 1u);
  uint around = 3u * dk, per_token = 2u * dk + 4u;
  return per_pass > around + per_token ? (per_pass - around) / per_token : 1u;
}

void main() {
  uint nv = args.nv;
  uint gid = gl_WorkGroupID.x;
  if (nv == 0u || args.nk == 0u || args.nv < args.nk || gid >= args.s * nv) return;
  uint s = gid / nv, h = gid % nv;
  I32 cu = I32(args.cu_seqlens);
  int t0 = cu.v[s], t1 = cu.v[s + 1];
  if (t1 <= t0) return;  // an empty sequence leaves its state as it was
  uint len = uint(t1 - t0), first = 0u, n = len;
  if (LOOP_CAP != 0u) {
    uint win = window_tokens(args.dk, args.dv);
    first = gl_WorkGroupID.y * win;
    if (first >= len) return;  // this sequence ended in an earlier window
    n = min(win, len - first);
  }
  delta_seq(I32(args.slots).v[s], uint(t0) + first, n, h);
}
