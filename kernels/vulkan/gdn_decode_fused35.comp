#version 460
#extension GL_GOOGLE_include_directive : require
// gdn_decode.gdn_decode_fused35 (kernels.def): one decode token per slot, exactly the chain
// split_qkvzba35 -> conv1d_update -> l2norm_qk -> gates -> delta_rule_decode -> gated_rmsnorm
// in one dispatch, grid.x = B*nk: workgroup (token b, key head hk) with the r = nv/nk value
// heads that read hk's q and k.  Every step is the arithmetic of that kernel's own shader (the
// conv and SiLU of conv_seq.glsl, the l2norm of l2norm_qk.comp, the gates of gates.glsl, the
// column recurrence of delta_seq.glsl, the gated norm of gated_rmsnorm.comp); the intermediate
// values stay in shared memory, and each named slot's conv and recurrent state are read once
// and written once.  p f32 [B, P] is in_proj's row [q | k | v | z | b | a]; slot -1: zero
// states, neither stored.  dk, dv <= DK_MAX (the host refuses larger ones).
#include "common.glsl"
#include "gates.glsl"

#ifndef VK_DELTA_DK_MAX
#error "VK_DELTA_DK_MAX comes from the build"
#endif
#define DK_MAX VK_DELTA_DK_MAX

// The value heads of a key head run side by side: NPAR groups of G = LOCAL_SIZE / NPAR
// invocations, group g on value heads g, g + NPAR, ...  (NPAR the largest power of two with
// NPAR <= r and NPAR * dv <= LOCAL_SIZE: 2 groups of 128 for the Qwen heads).
#define NPAR_MAX 8
#if LOCAL_SIZE / NPAR_MAX < 32
#error "o_mine holds dv / G columns with G >= 32"
#endif
shared float q_s[DK_MAX];
shared float k_s[DK_MAX];
shared float v_s[NPAR_MAX][DK_MAX];

// State rows a column reads before using them: the loads of a batch are in flight together
// (one a loop iteration, each behind the product before it, made the recurrence one memory
// round trip a row: 100 us a decode step on an H100, docs/perf.md).
#define ROWS_IN_FLIGHT 32u

// rows i0 .. i0 + ROWS_IN_FLIGHT - 1 of column j of a state [dk, dv] (0 past dk or without a slot)
void state_rows(F32 st, int slot, uint i0, uint j, uint dk, uint dv, out float w[ROWS_IN_FLIGHT]) {
  [[unroll]] for (uint u = 0u; u < ROWS_IN_FLIGHT; u++)
    w[u] = (slot < 0 || i0 + u >= dk) ? 0.0 : st.v[(i0 + u) * dv + j];
}

// conv + SiLU of channel ch (of C) for this token: window = conv_state[slot, ch] then x
float conv_channel(F32 row, int slot, uint ch, uint C, uint K) {
  uint Km1 = K - 1u;
  F32 st = f32_at(args.conv_state, (uint64_t(max(slot, 0)) * C + ch) * Km1);
  BF16 w = bf16_at(args.conv_w, uint64_t(ch) * K);
  float x = row.v[ch], acc = 0.0;
  for (uint j = 0u; j < Km1; j++) acc += bf16_to_f32(w.v[j]) * (slot < 0 ? 0.0 : st.v[j]);
  acc += bf16_to_f32(w.v[Km1]) * x;
  if (slot >= 0 && Km1 > 0u) {  // the window's last K-1 entries, oldest first
    for (uint j = 0u; j + 1u < Km1; j++) st.v[j] = st.v[j + 1u];
    st.v[Km1 - 1u] = x;
  }
  return silu(acc);
}

void main() {
  uint nk = args.nk, nv = args.nv, dk = args.dk, dv = args.dv, K = args.kw, t = gl_LocalInvocationID.x;
  if (nk == 0u || nv % nk != 0u || K == 0u || dk > DK_MAX || dv > DK_MAX || gl_WorkGroupID.x >= args.bsz * nk)
    return;
  uint b = gl_WorkGroupID.x / nk, hk = gl_WorkGroupID.x % nk, r = nv / nk;
  uint C = 2u * nk * dk + nv * dv, P = C + nv * dv + 2u * nv;
  F32 row = f32_at(args.p, uint64_t(b) * P);
  int slot = I32(args.slots).v[b];

  // q and k of key head hk: conv, SiLU, then each scaled to unit length (q further by dk^-1/2)
  float ssq = 0.0, ssk = 0.0;
  for (uint i = t; i < dk; i += LOCAL_SIZE) {
    float q = conv_channel(row, slot, hk * dk + i, C, K);
    float k = conv_channel(row, slot, nk * dk + hk * dk + i, C, K);
    q_s[i] = q;
    k_s[i] = k;
    ssq += q * q;
    ssk += k * k;
  }
  float qscale = inversesqrt(block_sum(ssq) + 1e-6) / sqrt(float(dk));
  float kscale = inversesqrt(block_sum(ssk) + 1e-6);
  for (uint i = t; i < dk; i += LOCAL_SIZE) {
    q_s[i] *= qscale;
    k_s[i] *= kscale;
  }
  memoryBarrierShared();
  barrier();

  uint npar = 1u;
  while (npar * 2u <= min(r, uint(NPAR_MAX)) && npar * 2u * dv <= LOCAL_SIZE) npar *= 2u;
  uint G = LOCAL_SIZE / npar, g = t / G, tg = t % G;
  BF16 norm_w = BF16(args.norm_w);
  for (uint hv0 = 0u; hv0 < r; hv0 += npar) {  // uniform: every group takes each round
    uint hv = hv0 + g, h = hk * r + hv;
    bool in_round = hv < r;
    if (in_round)
      for (uint j = tg; j < dv; j += G) v_s[g][j] = conv_channel(row, slot, 2u * nk * dk + h * dv + j, C, K);
    memoryBarrierShared();
    barrier();
    float ss = 0.0;
    float o_mine[(DK_MAX + 31u) / 32u];  // dv / G columns an invocation, G >= 32
    if (in_round) {
      float g_h = gate_g(row.v[C + nv * dv + nv + h], F32(args.a_log).v[h], bf16_to_f32(BF16(args.dt_bias).v[h]));
      float beta = sigmoid(row.v[C + nv * dv + h]), decay = exp(g_h);

      // the recurrence, a column of S [dk, dv] an invocation: kS over the decayed column, then
      // the column updated, o taken and the column stored (its second reads come from cache);
      // o rounded to bf16
      F32 st = f32_at(args.state, (uint64_t(max(slot, 0)) * nv + h) * dk * dv);
      for (uint j = tg, n = 0u; j < dv; j += G, n++) {
        float kS = 0.0;
        for (uint i0 = 0u; i0 < dk; i0 += ROWS_IN_FLIGHT) {
          float w[ROWS_IN_FLIGHT];
          state_rows(st, slot, i0, j, dk, dv, w);
          [[unroll]] for (uint u = 0u; u < ROWS_IN_FLIGHT; u++)
            if (i0 + u < dk) kS += k_s[i0 + u] * (w[u] * decay);
        }
        float d = beta * (v_s[g][j] - kS), o = 0.0;
        for (uint i0 = 0u; i0 < dk; i0 += ROWS_IN_FLIGHT) {
          float w[ROWS_IN_FLIGHT];
          state_rows(st, slot, i0, j, dk, dv, w);
          [[unroll]] for (uint u = 0u; u < ROWS_IN_FLIGHT; u++) {
            if (i0 + u < dk) {
              float S = w[u] * decay;
              S += k_s[i0 + u] * d;
              o += q_s[i0 + u] * S;
              if (slot >= 0) st.v[(i0 + u) * dv + j] = S;
            }
          }
        }
        o_mine[n] = bf16_to_f32(f32_to_bf16(o));
        ss += o_mine[n] * o_mine[n];
      }
    }

    // the gated norm of this value head's row: bf16(bf16(o * rsqrt(mean(o^2) + eps)) * w * silu(z))
    float inv = inversesqrt(group_sum(ss, G) / float(dv) + args.eps);
    if (in_round) {
      F32 z = f32_at(args.p, uint64_t(b) * P + C + h * dv);
      BF16 y = bf16_at(args.y, (uint64_t(b) * nv + h) * dv);
      for (uint j = tg, n = 0u; j < dv; j += G, n++) {
        float normed = bf16_to_f32(f32_to_bf16(o_mine[n] * inv));
        y.v[j] = f32_to_bf16(normed * bf16_to_f32(norm_w.v[j]) * silu(z.v[j]));
      }
    }
    barrier();  // v_s is the next round's
  }
}
