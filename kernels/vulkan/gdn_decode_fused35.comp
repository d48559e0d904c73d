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

shared float q_s[DK_MAX];
shared float k_s[DK_MAX];
shared float v_s[DK_MAX];

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

  BF16 norm_w = BF16(args.norm_w);
  for (uint hv = 0u; hv < r; hv++) {
    uint h = hk * r + hv;
    for (uint j = t; j < dv; j += LOCAL_SIZE) v_s[j] = conv_channel(row, slot, 2u * nk * dk + h * dv + j, C, K);
    memoryBarrierShared();
    barrier();
    float g = gate_g(row.v[C + nv * dv + nv + h], F32(args.a_log).v[h], bf16_to_f32(BF16(args.dt_bias).v[h]));
    float beta = sigmoid(row.v[C + nv * dv + h]), decay = exp(g);

    // the recurrence, a column of S [dk, dv] an invocation; o rounded to bf16
    F32 st = f32_at(args.state, (uint64_t(max(slot, 0)) * nv + h) * dk * dv);
    float o_mine[(DK_MAX + LOCAL_SIZE - 1) / LOCAL_SIZE];
    float ss = 0.0;
    for (uint j = t, n = 0u; j < dv; j += LOCAL_SIZE, n++) {
      float S[DK_MAX];
      float kS = 0.0;
      for (uint i = 0u; i < dk; i++) {
        S[i] = (slot < 0 ? 0.0 : st.v[i * dv + j]) * decay;
        kS += k_s[i] * S[i];
      }
      float d = beta * (v_s[j] - kS), o = 0.0;
      for (uint i = 0u; i < dk; i++) {
        S[i] += k_s[i] * d;
        o += q_s[i] * S[i];
      }
      if (slot >= 0)
        for (uint i = 0u; i < dk; i++) st.v[i * dv + j] = S[i];
      o_mine[n] = bf16_to_f32(f32_to_bf16(o));
      ss += o_mine[n] * o_mine[n];
    }

    // the gated norm of this value head's row: bf16(bf16(o * rsqrt(mean(o^2) + eps)) * w * silu(z))
    float inv = inversesqrt(block_sum(ss) / float(dv) + args.eps);
    F32 z = f32_at(args.p, uint64_t(b) * P + C + h * dv);
    BF16 y = bf16_at(args.y, (uint64_t(b) * nv + h) * dv);
    for (uint j = t, n = 0u; j < dv; j += LOCAL_SIZE, n++) {
      float normed = bf16_to_f32(f32_to_bf16(o_mine[n] * inv));
      y.v[j] = f32_to_bf16(normed * bf16_to_f32(norm_w.v[j]) * silu(z.v[j]));
    }
    barrier();  // v_s is the next value head's
  }
}
