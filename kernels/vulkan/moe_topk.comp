#version 460
#extension GL_GOOGLE_include_directive : require
// moe.moe_topk, one token per workgroup: p = softmax(logits[t, 0:E]) in f32; idx[t, :] =
// the k largest p in decreasing order, ties to the lower expert id; w[t, :] = their p,
// divided by their sum when norm != 0.
//
// Pick i is the best expert strictly after pick i-1 in the total order (p desc, id asc),
// so no "already taken" marks are needed and E is unbounded.  p_e is recomputed by the
// same formula each time, so comparisons are exact.
#include "common.glsl"

shared float best_p[LOCAL_SIZE];
shared uint best_id[LOCAL_SIZE];

bool before(float pa, uint ia, float pb, uint ib) { return pa > pb || (pa == pb && ia < ib); }

void main() {
  uint tok = gl_WorkGroupID.x;
  if (tok >= args.t) return;
  uint E = args.e, K = args.k, t = gl_LocalInvocationID.x;
  F32 logits = f32_at(args.logits, uint64_t(tok) * args.ld);
  I32 idx = i32_at(args.idx, uint64_t(tok) * K);
  F32 w = f32_at(args.w, uint64_t(tok) * K);

  float m = -1.0 / 0.0;
  for (uint e = t; e < E; e += LOCAL_SIZE) m = max(m, logits.v[e]);
  m = block_max(m);
  float z = 0.0;
  for (uint e = t; e < E; e += LOCAL_SIZE) z += exp(logits.v[e] - m);
  z = block_sum(z);

  float prev_p = 1.0 / 0.0;
  uint prev_id = 0xffffffffu;  // nothing picked yet: every expert is after it
  float total = 0.0;
  for (uint pick = 0; pick < K; pick++) {
    float bp = -1.0;  // below every probability
    uint bid = 0xffffffffu;
    for (uint e = t; e < E; e += LOCAL_SIZE) {
      float p = exp(logits.v[e] - m) / z;
      bool after = prev_id == 0xffffffffu || before(prev_p, prev_id, p, e);
      if (after && before(p, e, bp, bid)) {
        bp = p;
        bid = e;
      }
    }
    best_p[t] = bp;
    best_id[t] = bid;
    memoryBarrierShared();
    barrier();
    for (uint s = LOCAL_SIZE / 2; s > 0; s >>= 1) {
      if (t < s && before(best_p[t + s], best_id[t + s], best_p[t], best_id[t])) {
        best_p[t] = best_p[t + s];
        best_id[t] = best_id[t + s];
      }
      memoryBarrierShared();
      barrier();
    }
    prev_p = best_p[0];
    prev_id = best_id[0];
    barrier();
    bool found = prev_id != 0xffffffffu;  // false only when k > E
    if (t == 0u) {
      idx.v[pick] = found ? int(prev_id) : -1;
      w.v[pick] = found ? prev_p : 0.0;
    }
    if (found) {
      total += prev_p;
    } else {  // keeps the later picks empty too
      prev_id = 0u;
      prev_p = -1.0;
    }
  }
  if (t == 0u && args.norm != 0u && total > 0.0)
    for (uint pick = 0; pick < K; pick++) w.v[pick] = w.v[pick] / total;
}
