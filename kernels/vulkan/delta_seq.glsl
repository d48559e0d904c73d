// The gated delta rule over one sequence of one value head, shared by delta_rule_decode
// and delta_rule_prefill.  Per token, with S = state[slot, h] ([dk, dv], f32):
//   S *= exp(g);  d = beta * (v - k^T S);  S += k d^T;  o = q^T S
// Every column j of S evolves on its own (k, q, g, beta are shared by the columns), so
// invocation j keeps column j in a private array for the whole sequence and touches
// the state in memory only at the start and the end.  q and k of the current token are
// staged in shared memory.  slot -1: S starts at zero and is not stored.
//
// DK_MAX (VK_DELTA_DK_MAX from the build, also enforced by the host at launch) bounds
// the private column.
#ifndef VK_DELTA_DK_MAX
#error "VK_DELTA_DK_MAX comes from the build"
#endif
#define DK_MAX VK_DELTA_DK_MAX

shared float q_s[DK_MAX];
shared float k_s[DK_MAX];

// Tokens t0 .. t0+L-1 of qkv f32 [T, C] / g, beta f32 [T, nv] / o bf16 [T, nv, dv], value head h.
void delta_seq(int slot, uint t0, uint L, uint h) {
  uint nk = args.nk, nv = args.nv, dk = args.dk, dv = args.dv;
  uint hk = h / (nv / nk);  // value head h reads key head h / r
  uint C = 2u * nk * dk + nv * dv;
  uint t = gl_LocalInvocationID.x;
  F32 st = f32_at(args.state, (uint64_t(max(slot, 0)) * nv + h) * dk * dv);
  F32 g = F32(args.g), beta = F32(args.beta);

  for (uint c0 = 0; c0 < dv; c0 += LOCAL_SIZE) {  // uniform: barriers inside are safe
    uint j = c0 + t;
    bool mine = j < dv;
    float S[DK_MAX];
    for (uint i = 0; i < dk; i++) S[i] = 0.0;
    if (mine && slot >= 0)
      for (uint i = 0; i < dk; i++) S[i] = st.v[i * dv + j];

    for (uint n = 0; n < L; n++) {
      uint row = t0 + n;
      F32 qkv = f32_at(args.qkv, uint64_t(row) * C);
      barrier();  // the previous token's q_s / k_s are no longer read
      for (uint i = t; i < dk; i += LOCAL_SIZE) {
        q_s[i] = qkv.v[hk * dk + i];
        k_s[i] = qkv.v[nk * dk + hk * dk + i];
      }
      memoryBarrierShared();
      barrier();
      if (mine) {
        float decay = exp(g.v[row * nv + h]);
        float b = beta.v[row * nv + h];
        float v = qkv.v[2u * nk * dk + h * dv + j];
        float kS = 0.0;
        for (uint i = 0; i < dk; i++) {
          S[i] *= decay;
          kS += k_s[i] * S[i];
        }
        float d = b * (v - kS);
        float o = 0.0;
        for (uint i = 0; i < dk; i++) {
          S[i] += k_s[i] * d;
          o += q_s[i] * S[i];
        }
        bf16_at(args.o, (uint64_t(row) * nv + h) * dv).v[j] = f32_to_bf16(o);
      }
    }
    if (mine && slot >= 0)
      for (uint i = 0; i < dk; i++) st.v[i * dv + j] = S[i];
  }
}
