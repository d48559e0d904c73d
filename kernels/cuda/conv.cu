/* conv module: causal depthwise conv1d + SiLU over a sliding window kept in the state.
 *
 * Activations are f32 in and out (the mixer's f32 path); the weights are bf16.  One
 * thread per channel walks its sequence token by token (loads of consecutive channels
 * are coalesced).  For one sequence and channel the window is the K-1 state
 * values (oldest first) followed by the sequence's L inputs; output t reads
 * window[t .. t+K-1] and the new state is window[L .. L+K-2].  K = 4 (Qwen3-Next and
 * Qwen3.5) keeps the window in registers; other widths read it back from memory.
 * conv1d_prefill gives a thread a whole sequence (one long prompt: 32 blocks, latency
 * bound); conv1d_prefill_tiled gives it 64 tokens, so a long sequence fills the GPU;
 * conv1d_prefill_l2norm gives it 4 channels of 64 tokens and normalises the q and k heads
 * on the way out. */
#include "common.cuh"
#include "metrale/kernel_bounds.h"

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

/* The spans of the tile of tokens [a, e) a block computes: f(seq, t0, t1, first, last, own)
 * for each sequence [t0, t1) with outputs [first, last) here (own: its first token is here).
 * A sequence's first K-1 outputs (the only ones that read its initial state) and its
 * final state belong to the block holding its first token, even where those outputs
 * reach into the next tile: so one block reads and writes each state, in that order,
 * and no other block can see it half updated. */
template <typename F>
__device__ void tile_spans(const int *__restrict__ cu_seqlens, unsigned s, long a, long e, long hist, F f) {
  for (unsigned seq = seq_of(cu_seqlens, s, (int)a); seq < s; seq++) {
    const long t0 = cu_seqlens[seq], t1 = cu_seqlens[seq + 1];
    if (t0 >= e) break;
    if (t0 < 0 || t1 <= t0 || t1 <= a) continue; /* empty, malformed, or before the tile */
    const bool own = t0 >= a;
    const long first = own ? t0 : (a > t0 + hist ? a : t0 + hist);
    long last = t1 < e ? t1 : e;
    if (own && last < t0 + hist) last = t1 < t0 + hist ? t1 : t0 + hist;
    if (first < last || own) f(seq, t0, t1, first, last, own);
  }
}
}  // namespace

/* Block (bx, by) takes tokens [64 by, 64 by + 64) of channels [256 bx, 256 bx + 256). */
MK_KERNEL(conv1d_prefill_tiled)(float *__restrict__ y, const float *__restrict__ x,
                                const bf16 *__restrict__ w, float *__restrict__ state,
                                const int *__restrict__ cu_seqlens, const int *__restrict__ slots,
                                unsigned s, unsigned c, unsigned kw) {
  const unsigned ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c || s == 0 || kw == 0) return;
  const long hist = (long)kw - 1, a = (long)blockIdx.y * kTile;
  tile_spans(cu_seqlens, s, a, a + kTile, hist, [&](unsigned seq, long t0, long t1, long first, long last, bool own) {
    const int slot = slots[seq];
    float *st = slot < 0 ? nullptr : state + ((size_t)slot * c + ch) * hist;
    conv_span(y, x, w, st, t0, t1, first, last, own, c, ch, kw);
  });
}
MK_CHECK(conv1d_prefill_tiled, conv);

namespace {
constexpr unsigned kV = 4;                                     /* channels a thread of conv1d_prefill_l2norm */
constexpr unsigned kL2ConvBlock = mk_block("conv1d_prefill_l2norm"); /* threads */
static_assert(kV * kL2ConvBlock == 1024u && mk_block("conv1d_prefill_l2norm_xh") == kL2ConvBlock &&
                  mk_block("conv1d_prefill_l2norm_xhv") == kL2ConvBlock &&
                  mk_block("conv1d_prefill_l2norm_qkh") == kL2ConvBlock,
              "kernels.def: 1024 channels a block, all four forms");
/* tokens a thread has loads out for: 4 at three blocks an SM (80 registers); 6 and 8 at two
 * blocks an SM (103 and 118) were no faster at 4096 tokens and 1-2 % at 16384 (part 16) */
constexpr unsigned kRing = 4;

__device__ __forceinline__ float4 f4(float v) { return make_float4(v, v, v, v); }
/* A thread's 4 channels of x at one token as loaded (raw: 16 bytes of f32, or 8 bytes of IEEE
 * halves for conv1d_prefill_l2norm_xh), and as f32 (widen: exact).  The token loop's ring holds
 * raw loads and widens them where they are used, so that no conversion waits on a load. */
__device__ __forceinline__ float4 ld_raw(const float *p) { return *reinterpret_cast<const float4 *>(p); }
__device__ __forceinline__ uint2 ld_raw(const uint16_t *p) { return *reinterpret_cast<const uint2 *>(p); }
__device__ __forceinline__ float4 widen(const float4 &v) { return v; }
__device__ __forceinline__ float4 widen(const uint2 &v) {
  const float2 a = f16x2_to_f32(v.x), b = f16x2_to_f32(v.y);
  return make_float4(a.x, a.y, b.x, b.y);
}
template <typename R> __device__ __forceinline__ R raw_zero() { return R{}; }
template <typename X> __device__ __forceinline__ float4 ld4(const X *p) { return widen(ld_raw(p)); }

/* The l2norm of a q or k head on the way out: a head of dk channels is g = dk/4 consecutive
 * lanes of one warp, which add their squares with xor shuffles inside their group (for dk =
 * 128 the order of l2norm_qk_rows) and scale.  For dk = 128 (g = 32) the shuffles are
 * unrolled: 6 instructions a step -> 2.  (As a template on g with both forms in the kernel,
 * ptxas wanted 110 registers where each form alone takes 92-94, and spilled at 80.) */
struct qk_norm {
  unsigned g;        /* lanes a head */
  bool warp_qk, qk;  /* some lane of the warp / this lane holds q or k channels */
  float sc_extra;    /* dk^-1/2 for q heads, 1 for k heads */
  __device__ __forceinline__ float4 operator()(float4 v) const {
    if (!warp_qk) return v; /* a warp of value channels only skips the shuffles */
    float ss = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    if (g == 32) {
#pragma unroll
      for (unsigned off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off, 32);
    } else {
      for (unsigned off = g / 2; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off, g);
    }
    if (!qk) return v;
    float sc = 1.0f / sqrtf(ss + 1e-6f);
    sc *= sc_extra;
    return make_float4(v.x * sc, v.y * sc, v.z * sc, v.w * sc);
  }
};

/* Where a thread's 4 channels go a token: f32 into y (16-byte stores), or, with VH, IEEE
 * half into vh (8-byte stores: the value channels of conv1d_prefill_l2norm_xhv, rounded to
 * nearest even and saturated at +-65504 by one cvt a pair).  base is the first token's row at
 * the thread's channels, ld the bytes between rows. */
template <bool VH> struct out4 {
  static constexpr bool kByRow = true; /* a token's output ld bytes after the one before */
  char *base;
  size_t ld;
  bool half; /* VH only: this thread's channels are value channels */
  __device__ __forceinline__ char *row(long t) const { return base + (size_t)t * ld; }
  __device__ __forceinline__ void put(char *p, const float4 &v) const {
#if !defined(__HIPCC__)
    if (VH && half) {
      uint32_t lo, hi;
      asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(v.y), "f"(v.x));
      asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(v.w), "f"(v.z));
      *reinterpret_cast<uint2 *>(p) = make_uint2(lo, hi);
      return;
    }
#else
    if (VH && half) {
      auto h = [](float f) { return (uint32_t)f32_to_f16_bits(f > 65504.0f ? 65504.0f : f < -65504.0f ? -65504.0f : f); };
      *reinterpret_cast<uint2 *>(p) = make_uint2(h(v.x) | h(v.y) << 16, h(v.z) | h(v.w) << 16);
      return;
    }
#endif
    *reinterpret_cast<float4 *>(p) = v; /* f32 out, not rounded */
  }
};

#if !defined(__HIPCC__) /* conv1d_prefill_l2norm_qkh is not built for HIP: it pairs with sm_90a kernels */
/* Where conv1d_prefill_l2norm_qkh's q and k lanes put their 4 channels a token: 4 halves (rounded
 * to nearest even) at their place in the q/k planes (kernel_bounds.h, METRALE_WH_PLANE_AT).  Token t
 * is row (t - t0) % 64 of chunk (t - t0) / 64 of its sequence (first token t0), whose planes are
 * cstride bytes after the chunk's before.  A token's 128 channels are 16 pieces of 16 bytes, 128
 * bytes apart: stored as they come, a warp's store touches 16 lines (the f32 form's touched 4), and
 * that form took 304-309 us at 16384 tokens on the H100 where _xhv took 262; staged as below, 237
 * (docs/perf-prefill.md parts 27 and 28).  So a group of 8 rows (2 KiB of a plane, contiguous) whose
 * rows are all this span's goes through the warp's 2 KiB of shared memory and out as four 512-byte
 * stores once its 8th row is in; the rows of a group the span shares with a neighbour are stored
 * one by one.  In shared memory row r of lane
 * pair p sits at p 128 + (r ^ (p % 8)) 16, so that neither a row's 8-byte writes nor the 16-byte
 * reads of the flush meet twice in a bank.  Every lane of a q/k warp is live and walks the same
 * tokens, so the group test and the flush's __syncwarp are uniform over the warp.
 * (Its value lanes are out4<true>'s.) */
struct out_planes {
  static constexpr bool kByRow = false; /* put_tok(t, v) for each token */
  static constexpr size_t ld = 0;
  char *plane;       /* the sequence's first chunk's plane of this lane's head */
  unsigned cstride;  /* nk * METRALE_WH_QK_BYTES */
  unsigned dofs;     /* METRALE_WH_PLANE_AT(0, d) of the lane's first channel */
  int t0;            /* the sequence's first token */
  unsigned rga, rge; /* its rows [rga, rge): whole groups of 8 in this span, staged */
  __device__ __forceinline__ char *row(long t) const { /* the lane's 8 bytes of token t */
    const unsigned r = (unsigned)(t - t0);
    return plane + (size_t)(r >> 6) * cstride + ((r >> 3) & 7u) * (16u * 128u) + (r & 7u) * 16u + dofs;
  }
  __device__ __forceinline__ static uint2 halves(const float4 &v) {
    uint32_t lo, hi;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(v.y), "f"(v.x));
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(v.w), "f"(v.z));
    return make_uint2(lo, hi);
  }
  __device__ __forceinline__ void put_tok(long t, const float4 &v) const {
    const unsigned r = (unsigned)(t - t0);
    if (r < rga || r >= rge) {
      *reinterpret_cast<uint2 *>(row(t)) = halves(v);
      return;
    }
    __shared__ __align__(16) unsigned char stage_all[kL2ConvBlock / 32u][2048]; /* a warp's group of 8 rows */
    unsigned char *stage = stage_all[threadIdx.x / 32u];
    const unsigned lane = threadIdx.x % 32u, p = lane >> 1, rr = r & 7u;
    *reinterpret_cast<uint2 *>(stage + p * 128u + ((rr ^ (p & 7u)) << 4) + (lane & 1u) * 8u) = halves(v);
    if (rr != 7u) return;
    __syncwarp();
    const unsigned g = r >> 3; /* the group: rows 8g .. 8g + 7 of the sequence */
    char *dst = plane + (size_t)(g >> 3) * cstride + (g & 7u) * (16u * 128u) + lane * 16u;
#pragma unroll
    for (unsigned i = 0; i < 4; i++) { /* 512 contiguous bytes: lane's piece = (d/8 = 4i + lane/8, row lane % 8) */
      const unsigned q = 4u * i + (lane >> 3), rq = lane & 7u;
      *reinterpret_cast<uint4 *>(dst + i * 512u) =
          *reinterpret_cast<const uint4 *>(stage + q * 128u + ((rq ^ (q & 7u)) << 4));
    }
    __syncwarp(); /* the stage is read before the next group's rows go in */
  }
};
#endif

/* conv_span on the 4 channels ch..ch+3 of this thread (16-byte loads and stores of x and y, or
 * 8-byte loads where X is uint16_t: x in IEEE half, widened exactly; the state, [K-1] f32 a
 * channel, element by element), each channel's sums in conv_span's order.
 * Every output goes through norm(v) before it is stored; the block's threads walk the same
 * tokens in the same order (the spans are the block's), so norm may shuffle across a warp.
 * live: the channels exist (ch < C); a thread past C runs the loop for the shuffles and
 * touches no memory. */
template <typename X, typename Out, typename Norm>
__device__ void conv_span4(const Out &out, const X *__restrict__ x, const bf16 *__restrict__ w,
                           float *__restrict__ st, long t0, long t1, long a, long e, bool own, unsigned c,
                           unsigned ch, unsigned kw, bool live, const Norm &norm) {
  const long hist = (long)kw - 1;
  const size_t cs = c; /* elements a token */
  auto window = [&](long u) -> float4 { /* entry of token u, as conv_span's */
    if (!live) return f4(0.0f);
    if (u >= t0) return ld4(x + (size_t)u * cs + ch);
    if (!st) return f4(0.0f);
    const long i = u - t0 + hist;
    return make_float4(st[i], st[hist + i], st[2 * hist + i], st[3 * hist + i]);
  };
  auto wt = [&](unsigned lane, unsigned j) { return live ? bf16_to_f32(w[(size_t)(ch + lane) * kw + j]) : 0.0f; };
  /* the sequence's new state, as conv_span's (ascending order only reads the old entries at
   * or after the one written), once its old entries have been read */
  auto write_state = [&]() {
    if (!own || !st || !live) return;
    for (long i = 0; i < hist; i++) {
      const float4 v = window(t1 - hist + i);
      st[i] = v.x, st[hist + i] = v.y, st[2 * hist + i] = v.z, st[3 * hist + i] = v.w;
    }
  };
  auto emit = [&](char *yo, long t, float4 acc) { /* yo: where Out::kByRow, else t */
    const float4 v = norm(make_float4(silu_fast(acc.x), silu_fast(acc.y), silu_fast(acc.z), silu_fast(acc.w)));
    if (!live) return;
    if constexpr (Out::kByRow)
      out.put(yo, v);
    else
      out.put_tok(t, v);
  };
  if (kw != 4) { /* the general width: the window read back from memory a token */
    for (long t = a; t < e; t++) {
      float4 acc = f4(0.0f);
      for (unsigned j = 0; j < kw; j++) {
        const float4 v = window(t - hist + (long)j);
        acc.x += wt(0, j) * v.x;
        acc.y += wt(1, j) * v.y;
        acc.z += wt(2, j) * v.z;
        acc.w += wt(3, j) * v.w;
      }
      emit(Out::kByRow ? out.row(t) : nullptr, t, acc);
    }
    write_state();
    return;
  }
  float4 wj[4];
#pragma unroll
  for (unsigned j = 0; j < 4; j++) wj[j] = make_float4(wt(0, j), wt(1, j), wt(2, j), wt(3, j));
  float4 h0 = window(a - 3), h1 = window(a - 2), h2 = window(a - 1);
  /* the new state now: the old one has been read (only h0..h2 read it), and the loop
   * below then holds no registers for the state's pointer and span */
  write_state();
  /* one token: its output from the window h0 h1 h2 xt, the window moved on by one */
  auto step = [&](const float4 &xt, char *yo, long t) {
    float4 acc = f4(0.0f); /* the reference's order: j = 0..K-1, per channel */
    acc.x += wj[0].x * h0.x; acc.y += wj[0].y * h0.y; acc.z += wj[0].z * h0.z; acc.w += wj[0].w * h0.w;
    acc.x += wj[1].x * h1.x; acc.y += wj[1].y * h1.y; acc.z += wj[1].z * h1.z; acc.w += wj[1].w * h1.w;
    acc.x += wj[2].x * h2.x; acc.y += wj[2].y * h2.y; acc.z += wj[2].z * h2.z; acc.w += wj[2].w * h2.w;
    acc.x += wj[3].x * xt.x; acc.y += wj[3].y * xt.y; acc.z += wj[3].z * xt.z; acc.w += wj[3].w * xt.w;
    emit(yo, t, acc);
    h0 = h1;
    h1 = h2;
    h2 = xt;
  };
  /* tokens [a, e) in a ring of kRing loads in flight: token i's slot takes token i + kRing's load
   * as token i is computed (whose shuffles, for q and k heads, are a chain of latencies),
   * so a thread always has kRing loads out.  Pointers move by a row a token and the loop tests
   * no bounds but the loads': the index arithmetic and bound tests of the form that
   * checked each token were half its instructions (docs/perf-prefill.md, part 16).  Two
   * buffers of 4 (one computed, one loading) spilled at three blocks an SM. */
  const X *xp = x + (size_t)a * cs + ch;     /* the next load's row; read only where live */
  char *yp = Out::kByRow ? out.row(a) : nullptr; /* the next output's row (Out::kByRow) */
  long tn = a;                               /* the next output's token (else) */
  int n = (int)(e - a);                      /* tokens left */
  using R = decltype(ld_raw(xp));
  R xs[kRing];
#pragma unroll
  for (int i = 0; i < (int)kRing; i++, xp += cs) xs[i] = live && i < n ? ld_raw(xp) : raw_zero<R>();
  for (; n >= (int)kRing; n -= (int)kRing) {
#pragma unroll
    for (int i = 0; i < (int)kRing; i++, xp += cs, yp += out.ld, tn++) {
      const float4 xt = widen(xs[i]);
      xs[i] = live && i + (int)kRing < n ? ld_raw(xp) : raw_zero<R>();
      step(xt, yp, tn);
    }
  }
#pragma unroll
  for (int i = 0; i + 1 < (int)kRing; i++, yp += out.ld, tn++)
    if (i < n) step(widen(xs[i]), yp, tn);
}

}  // namespace

namespace {
/* tile_spans over this block's tokens in the l2norm forms, [by T / G, (by + 1) T / G) of the G =
 * gridDim.y blocks along y (T = cu_seqlens[s]), f also given each sequence's conv state at this
 * thread's channels (null for a padding slot or channels past C). */
template <unsigned kAlign = 1u, typename F>
__device__ __forceinline__ void block_spans(const int *__restrict__ cu_seqlens, const int *__restrict__ slots,
                                            float *__restrict__ state, unsigned s, unsigned c, unsigned ch,
                                            unsigned kw, bool live, F f) {
  const uint64_t T = cu_seqlens[s] > 0 ? (uint64_t)cu_seqlens[s] : 0u, G = gridDim.y;
  /* with kAlign > 1 (a power of two) each block's first and end token a multiple of it (the last
   * block's end T), so that a sequence starting at a multiple of it is cut between the planes'
   * groups of rows */
  static_assert((kAlign & (kAlign - 1u)) == 0u, "a power of two");
  auto cut = [&](uint64_t b) {
    if constexpr (kAlign == 1u)
      return (long)(b * T / G);
    else
      return b >= G ? (long)T : (long)((b * T / G) & ~(uint64_t)(kAlign - 1u));
  };
  const long a = cut(blockIdx.y), e = cut(blockIdx.y + 1u), hist = (long)kw - 1;
  tile_spans(cu_seqlens, s, a, e, hist, [&](unsigned seq, long t0, long t1, long first, long last, bool own) {
    const int slot = slots[seq];
    f(seq, t0, t1, first, last, own, slot < 0 || !live ? nullptr : state + ((size_t)slot * c + ch) * hist);
  });
}

/* conv1d_prefill_l2norm's body on x of element type X (f32, or IEEE half for _xh and _xhv); with
 * VH the value channels go to vh in half (_xhv), else to y. */
template <typename X, bool VH = false>
__device__ __forceinline__ void conv_l2norm_body(float *__restrict__ y, uint16_t *__restrict__ vh, const X *__restrict__ x,
                                                 const bf16 *__restrict__ w, float *__restrict__ state,
                                                 const int *__restrict__ cu_seqlens, const int *__restrict__ slots,
                                                 unsigned s, unsigned c, unsigned kw, unsigned nk, unsigned dk) {
  /* shapes the launch rules reject (kernels/cuda/launch_rules.c): do nothing, uniformly */
  if (s == 0 || kw == 0 || c % kV != 0 || dk < kV || dk > 32u * kV || (dk & (dk - 1u)) != 0 ||
      (sizeof(X) == 4 ? !aligned16(x) : (uintptr_t)x % 8u != 0) || !aligned16(y) ||
      (VH && ((uintptr_t)vh % 8u != 0 || 2 * (size_t)nk * dk > c)))
    return;
  const unsigned ch = (blockIdx.x * kL2ConvBlock + threadIdx.x) * kV;
  const bool live = ch < c;
  const size_t qk_end = 2 * (size_t)nk * dk;
  const bool qk = ch < qk_end; /* uniform over a head's group of lanes */
  qk_norm norm;
  norm.g = dk / kV;
  norm.qk = qk;
  norm.warp_qk = __any_sync(0xffffffffu, qk); /* skipping: 330 -> 321 us at 16384 tokens (part 5) */
  norm.sc_extra = ch < (size_t)nk * dk ? 1.0f / sqrtf((float)dk) : 1.0f;
  out4<VH> out;
  out.half = VH && !qk;
  if (out.half) /* vh [T, C - 2*nk*dk] */
    out.base = reinterpret_cast<char *>(vh + (ch - qk_end)), out.ld = (c - qk_end) * sizeof(uint16_t);
  else
    out.base = reinterpret_cast<char *>(y + ch), out.ld = (size_t)c * sizeof(float);
  block_spans(cu_seqlens, slots, state, s, c, ch, kw, live,
              [&](unsigned, long t0, long t1, long first, long last, bool own, float *st) {
                conv_span4(out, x, w, st, t0, t1, first, last, own, c, ch, kw, live, norm);
              });
}
#if !defined(__HIPCC__)
/* conv1d_prefill_l2norm_xhv's body with the q and k heads into the q/k planes at the start of ws
 * (out_planes; dk = 128, so that a warp's 32 lanes are one head), a sequence's last chunk zeroed
 * past its end by the lanes of the block that computes its last token. */
__device__ __forceinline__ void conv_l2norm_planes_body(unsigned char *__restrict__ ws, uint16_t *__restrict__ vh,
                                                        const uint16_t *__restrict__ x, const bf16 *__restrict__ w,
                                                        float *__restrict__ state, const int *__restrict__ cu_seqlens,
                                                        const int *__restrict__ slots, unsigned s, unsigned c,
                                                        unsigned kw, unsigned nk, unsigned dk) {
  /* shapes the launch rules reject (kernels/cuda/launch_rules.c): do nothing, uniformly */
  if (s == 0 || kw == 0 || c % kV != 0 || dk != 128u || (uintptr_t)x % 8u != 0 || !aligned16(ws) ||
      (uintptr_t)vh % 8u != 0 || 2 * (size_t)nk * dk > c)
    return;
  const unsigned ch = (blockIdx.x * kL2ConvBlock + threadIdx.x) * kV;
  const bool live = ch < c;
  const size_t qk_end = 2 * (size_t)nk * dk;
  const bool qk = ch < qk_end; /* uniform over a warp: 32 lanes of 4 channels are one head */
  qk_norm norm;
  norm.g = dk / kV;
  norm.qk = qk;
  norm.warp_qk = qk;
  norm.sc_extra = ch < (size_t)nk * dk ? 1.0f / sqrtf((float)dk) : 1.0f;
  out4<true> vout; /* value lanes: as conv1d_prefill_l2norm_xhv's */
  vout.half = true;
  vout.base = reinterpret_cast<char *>(vh + (ch - qk_end)), vout.ld = (c - qk_end) * sizeof(uint16_t);
  const unsigned hh = ch / 128u, d = ch % 128u; /* q/k lanes: head hh (q heads, then k heads), dimension d */
  out_planes qout;
  qout.cstride = nk * METRALE_WH_QK_BYTES;
  qout.dofs = METRALE_WH_PLANE_AT(0u, d);
  const size_t in_plane = (size_t)(hh % nk) * METRALE_WH_QK_BYTES + (hh / nk) * METRALE_WH_PLANE_BYTES;
  block_spans<8u>(cu_seqlens, slots, state, s, c, ch, kw, live,
              [&](unsigned seq, long t0, long t1, long first, long last, bool own, float *st) {
                if (!qk) { /* a warp of value lanes: no l2norm */
                  conv_span4(vout, x, w, st, t0, t1, first, last, own, c, ch, kw, live,
                             [](float4 v) { return v; });
                  return;
                }
                /* the sequence's first chunk (kernels.def: min(cu[s], (cu[s] + 63 s) / 64)) */
                const size_t j1 = ((size_t)t0 + 63u * (size_t)seq) / 64u;
                const size_t j0 = (size_t)t0 < j1 ? (size_t)t0 : j1;
                out_planes o = qout;
                o.plane = reinterpret_cast<char *>(ws) + j0 * o.cstride + in_plane;
                o.t0 = (int)t0;
                o.rga = (unsigned)((first - t0 + 7) & ~7L);
                o.rge = (unsigned)((last - t0) & ~7L);
                conv_span4(o, x, w, st, t0, t1, first, last, own, c, ch, kw, live, norm);
                if (last == t1) /* the last chunk's rows past the sequence: zero */
                  for (long t = t1; (t - t0) % 64 != 0; t++)
                    *reinterpret_cast<uint2 *>(o.row(t)) = make_uint2(0u, 0u);
              });
}
#endif
}  // namespace

/* conv1d_prefill_tiled on 4 channels a thread (1024 a block, 16-byte accesses), with the
 * l2norm of the q and k heads (qk_norm) applied to each output before it is stored.  Its
 * SiLU is silu_fast (a few ulp from the tiled kernel's silu_f): with the accurate expf and
 * division its instructions took 74 % of the issue slots at 4096 tokens on the H200; 90 -> 77
 * us there, 304 -> 282 us at 16384 (docs/perf-prefill.md, part 8).  The q and k heads are
 * written once, already normalised, and never read back.  Three blocks an SM (80 registers;
 * ptxas spills 52 bytes, all outside the token loop): on the H200 at 16384 tokens 303 us
 * against 334-340 with two (part 5); since part 16, two blocks with deeper rings are within
 * 1-2 % of three.  A block takes its share of the tokens, not 64 of them, so that the ops can
 * make whole waves of blocks (at 4096 tokens 512 blocks of 64 ran 1.3 waves in the time of
 * two). */
extern "C" __global__ void __launch_bounds__(mk_block("conv1d_prefill_l2norm"), 3)
conv1d_prefill_l2norm(float *__restrict__ y, const float *__restrict__ x, const bf16 *__restrict__ w,
                      float *__restrict__ state, const int *__restrict__ cu_seqlens, const int *__restrict__ slots,
                      unsigned s, unsigned c, unsigned kw, unsigned nk, unsigned dk) {
  conv_l2norm_body(y, nullptr, x, w, state, cu_seqlens, slots, s, c, kw, nk, dk);
}
MK_CHECK(conv1d_prefill_l2norm, conv);

/* conv1d_prefill_l2norm on mixed in IEEE half (gemm_f16_ws_cols3q's y0): each thread's 4 channels
 * of a token one 8-byte load, widened exactly; the same sums, state and outputs as on the f32
 * values of those halves.  At 4096 tokens its loads are 67 MB where the f32 form's are 134. */
extern "C" __global__ void __launch_bounds__(mk_block("conv1d_prefill_l2norm_xh"), 3)
conv1d_prefill_l2norm_xh(float *__restrict__ y, const uint16_t *__restrict__ x, const bf16 *__restrict__ w,
                         float *__restrict__ state, const int *__restrict__ cu_seqlens, const int *__restrict__ slots,
                         unsigned s, unsigned c, unsigned kw, unsigned nk, unsigned dk) {
  conv_l2norm_body(y, nullptr, x, w, state, cu_seqlens, slots, s, c, kw, nk, dk);
}
MK_CHECK(conv1d_prefill_l2norm_xh, conv);

/* conv1d_prefill_l2norm_xh with the value channels stored in IEEE half to vh [T, C - 2*nk*dk]
 * (for delta_rule_prefill_chunked_f16_prep_vh, whose fp16 products round v anyway): at 4096
 * tokens of the a3b shape 34 MB of stores less, where _xh writes v's 67 MB in f32 (H200: 62-63 ->
 * 56-60 us; docs/perf-prefill.md part 19). */
extern "C" __global__ void __launch_bounds__(mk_block("conv1d_prefill_l2norm_xhv"), 3)
conv1d_prefill_l2norm_xhv(float *__restrict__ y, uint16_t *__restrict__ vh, const uint16_t *__restrict__ x,
                          const bf16 *__restrict__ w, float *__restrict__ state, const int *__restrict__ cu_seqlens,
                          const int *__restrict__ slots, unsigned s, unsigned c, unsigned kw, unsigned nk, unsigned dk) {
  conv_l2norm_body<uint16_t, true>(y, vh, x, w, state, cu_seqlens, slots, s, c, kw, nk, dk);
}
MK_CHECK(conv1d_prefill_l2norm_xhv, conv);

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

#if !defined(__HIPCC__)
/* conv1d_prefill_l2norm_xhv with q and k in IEEE half straight into the whole-head kernels' q/k
 * planes (for delta_rule_prefill_chunked_wh_prep_qkh, whose phase 0 then reads k's 16 KiB plane
 * where it read 32 KiB of f32 q and k and wrote the planes: docs/perf-prefill.md part 27).  Not
 * built for HIP: the kernels it feeds are sm_90a's. */
extern "C" __global__ void __launch_bounds__(mk_block("conv1d_prefill_l2norm_qkh"), 3)
conv1d_prefill_l2norm_qkh(unsigned char *__restrict__ ws, uint16_t *__restrict__ vh, const uint16_t *__restrict__ x,
                          const bf16 *__restrict__ w, float *__restrict__ state, const int *__restrict__ cu_seqlens,
                          const int *__restrict__ slots, unsigned s, unsigned c, unsigned kw, unsigned nk, unsigned dk) {
  conv_l2norm_planes_body(ws, vh, x, w, state, cu_seqlens, slots, s, c, kw, nk, dk);
}
MK_CHECK(conv1d_prefill_l2norm_qkh, conv);
#endif
