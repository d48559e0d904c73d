/* conv module: causal depthwise conv1d + SiLU over a sliding window kept in the state.
 *
 * Activations are f32 in and out (the mixer's f32 path); the weights are bf16.  One
 * thread per channel walks its sequence token by token (loads of consecutive channels
 * are coalesced).  For one sequence and channel the window is the K-1 state
 * values (oldest first) followed by the sequence's L inputs; output t reads
 * window[t .. t+K-1] and the new state is window[L .. L+K-2].  K = 4 (Qwen3-Next and
 * Qwen3.5) keeps the window in registers; other widths read it back from memory.
 * conv1d_prefill gives a thread a whole sequence (one long prompt: 32 blocks, latency
 * bound); conv1d_prefill_tiled gives it 64 tokens, so a long sequence fills the GPU. */
#include "common.cuh"

namespace {
/* One sequence of len tokens on channel ch.  x, y point at its first token's row [C];
 * st is the channel's state [K-1], or NULL for padding (zero state, not written). */
__device__ void conv_channel(float *__restrict__ y, const float *__restrict__ x,
                             const bf16 *__restrict__ w, float *__restrict__ st, size_t len,
                             unsigned c, unsigned ch, unsigned kw) {
  const bf16 *wc = w + (size_t)ch * kw; /* [K] */
  if (kw == 4) {
    const float w0 = bf16_to_f32(wc[0]), w1 = bf16_to_f32(wc[1]), w2 = bf16_to_f32(wc[2]),
                w3 = bf16_to_f32(wc[3]);
    float h0 = st ? st[0] : 0.0f, h1 = st ? st[1] : 0.0f, h2 = st ? st[2] : 0.0f;
#pragma unroll 4
    for (size_t t = 0; t < len; t++) {
      const float xt = x[t * c + ch];
      float acc = 0.0f; /* the reference's order: j = 0..K-1 */
      acc += w0 * h0;
      acc += w1 * h1;
      acc += w2 * h2;
      acc += w3 * xt;
      y[t * c + ch] = silu_f(acc); /* f32 out, not rounded */
      h0 = h1;
      h1 = h2;
      h2 = xt;
    }
    if (st && len > 0) {
      st[0] = h0;
      st[1] = h1;
      st[2] = h2;
    }
    return;
  }
  const size_t hist = kw - 1; /* K-1 */
  /* window[i] for i in [0, hist + len) */
  auto window = [&](size_t i) -> float {
    return i < hist ? (st ? st[i] : 0.0f) : x[(i - hist) * c + ch];
  };
  for (size_t t = 0; t < len; t++) {
    float acc = 0.0f;
    for (unsigned j = 0; j < kw; j++) acc += bf16_to_f32(wc[j]) * window(t + j);
    y[t * c + ch] = silu_f(acc);
  }
  if (!st || len == 0) return;
  /* ascending order only reads entries at or after the one being written */
  for (size_t i = 0; i < hist; i++) st[i] = window(len + i);
}
}  // namespace

MK_KERNEL(conv1d_prefill)(float *__restrict__ y, const float *__restrict__ x,
                          const bf16 *__restrict__ w, float *__restrict__ state,
                          const int *__restrict__ cu_seqlens, const int *__restrict__ slots,
                          unsigned s, unsigned c, unsigned kw) {
  const unsigned ch = blockIdx.x * blockDim.x + threadIdx.x, seq = blockIdx.y;
  if (ch >= c || seq >= s || kw == 0) return;
  const int t0 = cu_seqlens[seq], t1 = cu_seqlens[seq + 1];
  if (t0 < 0 || t1 < t0) return;
  const int slot = slots[seq];
  float *st = slot < 0 ? nullptr : state + ((size_t)slot * c + ch) * (kw - 1);
  conv_channel(y + (size_t)t0 * c, x + (size_t)t0 * c, w, st, (size_t)(t1 - t0), c, ch, kw);
}
MK_CHECK(conv1d_prefill, conv);

namespace {
constexpr unsigned kTile = 64; /* tokens per block of conv1d_prefill_tiled (kernels.def) */
/* tokens whose loads a thread issues together: on the H200 at 16384 tokens the tiled kernel
 * took 364 us with 8, 331 with 16, 343 with 32 (73 registers: three blocks an SM, not four) */
constexpr unsigned kGroup = 16;

/* The sequence holding token t: the largest s < n with cu[s] <= t (empty sequences
 * before it share its start and are passed over); 0 when none. */
__device__ unsigned seq_of(const int *cu, unsigned n, int t) {
  unsigned lo = 0, hi = n; /* answer in [lo, hi) */
  while (hi - lo > 1) {
    const unsigned mid = lo + (hi - lo) / 2;
    if (cu[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* Tokens [a, e) of one sequence whose tokens are [t0, t1) on channel ch.  Window entry
 * of token u: x[u] for u >= t0, else the initial state st[u - t0 + K-1] (zeros when st
 * is NULL).  With own (this block holds the sequence's first token) it then writes the
 * final state: it is the only block that reads the initial state (see the kernel). */
__device__ void conv_span(float *__restrict__ y, const float *__restrict__ x,
                          const bf16 *__restrict__ w, float *__restrict__ st, long t0, long t1,
                          long a, long e, bool own, unsigned c, unsigned ch, unsigned kw) {
  const bf16 *wc = w + (size_t)ch * kw; /* [K] */
  const long hist = (long)kw - 1;       /* K-1 */
  auto window = [&](long u) -> float {
    return u >= t0 ? x[(size_t)u * c + ch] : (st ? st[u - t0 + hist] : 0.0f);
  };
  if (kw == 4) {
    const float w0 = bf16_to_f32(wc[0]), w1 = bf16_to_f32(wc[1]), w2 = bf16_to_f32(wc[2]),
                w3 = bf16_to_f32(wc[3]);
    float h0 = window(a - 3), h1 = window(a - 2), h2 = window(a - 1);
    for (long g = a; g < e; g += kGroup) {
      float xs[kGroup];
#pragma unroll
      for (unsigned i = 0; i < kGroup; i++)
        xs[i] = g + i < e ? x[(size_t)(g + i) * c + ch] : 0.0f; /* all loads in flight */
#pragma unroll
      for (unsigned i = 0; i < kGroup; i++) {
        if (g + i >= e) break;
        float acc = 0.0f; /* the reference's order: j = 0..K-1 */
        acc += w0 * h0;
        acc += w1 * h1;
        acc += w2 * h2;
        acc += w3 * xs[i];
        y[(size_t)(g + i) * c + ch] = silu_f(acc); /* f32 out, not rounded */
        h0 = h1;
        h1 = h2;
        h2 = xs[i];
      }
    }
  } else {
    for (long t = a; t < e; t++) {
      float acc = 0.0f;
      for (unsigned j = 0; j < kw; j++) acc += bf16_to_f32(wc[j]) * window(t - hist + (long)j);
      y[(size_t)t * c + ch] = silu_f(acc);
    }
  }
  if (!own || !st) return;
  /* new state = window entries of tokens t1-K+1 .. t1-1; ascending order only reads the
   * old entries at or after the one being written (t1 > t0), so in place is safe */
  for (long i = 0; i < hist; i++) st[i] = window(t1 - hist + i);
}
}  // namespace

/* Block (bx, by) takes tokens [64 by, 64 by + 64) of channels [256 bx, 256 bx + 256).
 * A sequence's first K-1 outputs (the only ones that read its initial state) and its
 * final state belong to the block holding its first token, even where those outputs
 * reach into the next tile: so one block reads and writes each state, in that order,
 * and no other block can see it half updated. */
MK_KERNEL(conv1d_prefill_tiled)(float *__restrict__ y, const float *__restrict__ x,
                                const bf16 *__restrict__ w, float *__restrict__ state,
                                const int *__restrict__ cu_seqlens, const int *__restrict__ slots,
                                unsigned s, unsigned c, unsigned kw) {
  const unsigned ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c || s == 0 || kw == 0) return;
  const long hist = (long)kw - 1;
  const long a = (long)blockIdx.y * kTile, e = a + kTile; /* this block's tokens */
  for (unsigned seq = seq_of(cu_seqlens, s, (int)a); seq < s; seq++) {
    const long t0 = cu_seqlens[seq], t1 = cu_seqlens[seq + 1];
    if (t0 >= e) break;
    if (t0 < 0 || t1 <= t0 || t1 <= a) continue; /* empty, malformed, or before the tile */
    const bool own = t0 >= a;
    const long first = own ? t0 : (a > t0 + hist ? a : t0 + hist);
    long last = t1 < e ? t1 : e;
    if (own && last < t0 + hist) last = t1 < t0 + hist ? t1 : t0 + hist;
    const int slot = slots[seq];
    float *st = slot < 0 ? nullptr : state + ((size_t)slot * c + ch) * hist;
    if (first < last || own)
      conv_span(y, x, w, st, t0, t1, first, last, own, c, ch, kw);
  }
}
MK_CHECK(conv1d_prefill_tiled, conv);

MK_KERNEL(conv1d_update)(float *__restrict__ y, const float *__restrict__ x,
                         const bf16 *__restrict__ w, float *__restrict__ state,
                         const int *__restrict__ slots, unsigned bsz, unsigned c, unsigned kw) {
  const unsigned ch = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
  if (ch >= c || b >= bsz || kw == 0) return;
  const int slot = slots[b];
  float *st = slot < 0 ? nullptr : state + ((size_t)slot * c + ch) * (kw - 1);
  conv_channel(y + (size_t)b * c, x + (size_t)b * c, w, st, 1, c, ch, kw);
}
MK_CHECK(conv1d_update, conv);
