/* conv module: causal depthwise conv1d + SiLU over a sliding window kept in the state.
 *
 * Activations are f32 in and out (the mixer's f32 path); the weights are bf16.  One
 * thread per channel walks its sequence token by token (loads of consecutive channels
 * are coalesced).  For one sequence and channel the window is the K-1 state
 * values (oldest first) followed by the sequence's L inputs; output t reads
 * window[t .. t+K-1] and the new state is window[L .. L+K-2].  K = 4 (Qwen3-Next and
 * Qwen3.5) keeps the window in registers; other widths read it back from memory. */
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
