// Causal depthwise conv + SiLU of one channel over one sequence, shared by
// conv1d_prefill and conv1d_update.  x and y are f32 [T, C]; y = silu(conv) is stored
// unrounded.  The window is state[slot] (K-1 f32 values, oldest first) followed by the
// sequence's tokens; token i's output uses window[i .. i+K-1].  Afterwards state[slot]
// holds the window's last K-1 entries, copied bit for bit.  slot -1: the state is zero
// and not written.  Invocation = channel, so the in-place state update needs no
// synchronisation; it walks forward, reading entry L+i >= i before anything overwrites it.

// Conv widths up to CONV_K_FAST take the batched loop (Qwen3-Next's is 4), wider ones one
// output at a time.
#define CONV_K_FAST 4u
#define CONV_TOKENS 16u

// the bits of window[idx] of channel c for the sequence starting at token t0
uint conv_window_bits(U32 st, int slot, uint Km1, uint t0, uint idx, uint C, uint c) {
  if (idx < Km1) {
    if (slot < 0) return 0u;
    return st.v[idx];
  }
  return u32_at(args.x, uint64_t(t0 + idx - Km1) * C).v[c];
}

// Outputs first .. first+n-1 of the sequence (the state is stored by the range that ends it).
void conv_seq_range(int slot, uint t0, uint L, uint first, uint n, uint c) {
  uint C = args.c, K = args.kw;
  if (K == 0u) return;
  uint Km1 = K - 1u;
  U32 st = u32_at(args.state, (uint64_t(max(slot, 0)) * C + c) * Km1);
  BF16 w = bf16_at(args.w, uint64_t(c) * K);
  if (K <= CONV_K_FAST) {
    // CONV_TOKENS outputs at a time from window entries loaded together: one memory round
    // trip a batch, not one a tap (a long sequence on few channels is one chain a channel)
    float wv[CONV_K_FAST];
    [[unroll]] for (uint j = 0u; j < CONV_K_FAST; j++) wv[j] = j < K ? bf16_to_f32(w.v[j]) : 0.0;
    for (uint i0 = first; i0 < first + n; i0 += CONV_TOKENS) {
      float xv[CONV_TOKENS + CONV_K_FAST - 1u];
      [[unroll]] for (uint e = 0u; e < CONV_TOKENS + CONV_K_FAST - 1u; e++)
        xv[e] = e < CONV_TOKENS + Km1 && i0 + e < first + n + Km1
                    ? uintBitsToFloat(conv_window_bits(st, slot, Km1, t0, i0 + e, C, c))
                    : 0.0;
      [[unroll]] for (uint u = 0u; u < CONV_TOKENS; u++) {
        if (i0 + u < first + n) {
          float acc = 0.0;
          [[unroll]] for (uint j = 0u; j < CONV_K_FAST; j++)
            if (j < K) acc += wv[j] * xv[u + j];
          f32_at(args.y, uint64_t(t0 + i0 + u) * C).v[c] = silu(acc);
        }
      }
    }
  } else {
    for (uint i = first; i < first + n; i++) {
      float acc = 0.0;
      for (uint j = 0; j < K; j++)
        acc += bf16_to_f32(w.v[j]) * uintBitsToFloat(conv_window_bits(st, slot, Km1, t0, i + j, C, c));
      f32_at(args.y, uint64_t(t0 + i) * C).v[c] = silu(acc);
    }
  }
  if (slot < 0 || first + n != L) return;
  for (uint i = 0; i < Km1; i++) st.v[i] = conv_window_bits(st, slot, Km1, t0, L + i, C, c);
}

void conv_seq(int slot, uint t0, uint L, uint c) { conv_seq_range(slot, t0, L, 0u, L, c); }
