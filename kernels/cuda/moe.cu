/* moe module: router top-k, routed expert projections, combine.
 *
 * The expert projections give each block one routed row and 64 output features: 8
 * groups of 32 threads, each group dotting 8 weight rows with the row's activation.
 * A group's lanes read consecutive 16-byte chunks of a weight row (coalesced) and the 8
 * rows' loads are independent, so several are in flight per thread.  Where a group's 8
 * rows all exist, two k-steps of them (16 loads of 16 bytes) are issued before use: at
 * decode a block walks its weights in few round trips, and R*ceil(N/64) blocks are
 * barely more than the SMs, so each round trip is one block's latency.
 *
 * moe_topk_warp and moe_combine_wide are the decode-shaped forms of moe_topk and
 * moe_combine (kernels.def). */
#include "common.cuh"
#include "gemv.cuh"

namespace {
constexpr unsigned kProjBlock = mk_block("moe_gate_up");
static_assert(kProjBlock == mk_block("moe_down"), "one block size for both projections");
constexpr unsigned P_FEAT = 64;                     /* output features per block (contract) */
constexpr unsigned P_LANES = 32;                    /* threads per weight row */
constexpr unsigned P_GROUPS = kProjBlock / P_LANES; /* 8 */
constexpr unsigned P_PER = P_FEAT / P_GROUPS;       /* rows per group: 8 */
static_assert(P_GROUPS * P_PER == P_FEAT && P_FEAT <= kProjBlock, "projection mapping");

/* out[f] = W[f, :] . xr for f in [f0, f0 + 64) clipped to nrows.  W bf16 [nrows, K] (one
 * expert), xr bf16 [K].  ex < 0 (no expert) gives zeros, as the reference does. */
template <bool F32_OUT>
__device__ __forceinline__ void project_row(void *out, const bf16 *__restrict__ W, int ex,
                                            unsigned nrows, const bf16 *__restrict__ xr,
                                            unsigned K, unsigned f0) {
  __shared__ float part[P_FEAT][P_LANES + 1]; /* +1: the final sums read down rows */
  const unsigned g = threadIdx.x / P_LANES, lane = threadIdx.x % P_LANES;
  const unsigned fg = f0 + g * P_PER; /* this group's first feature */
  float acc[P_PER];
#pragma unroll
  for (unsigned i = 0; i < P_PER; i++) acc[i] = 0.0f;
  if (ex >= 0) {
    const bf16 *Wg = W + ((size_t)ex * nrows + fg) * K;
    const bool vec = K % 8u == 0 && aligned16(W) && aligned16(xr);
    if (vec) {
      constexpr unsigned step = P_LANES * 8u;
      unsigned kk = lane * 8u;
      if (fg + P_PER <= nrows) {
        for (; kk + step < K; kk += 2u * step) {
          uint4 wv[2][P_PER];
#pragma unroll
          for (unsigned u = 0; u < 2; u++)
#pragma unroll
            for (unsigned i = 0; i < P_PER; i++)
              wv[u][i] = load_stream16(Wg + (size_t)i * K + kk + u * step);
#pragma unroll
          for (unsigned u = 0; u < 2; u++) {
            float xf[8];
            unpack8(*reinterpret_cast<const uint4 *>(xr + kk + u * step), xf);
#pragma unroll
            for (unsigned i = 0; i < P_PER; i++) acc[i] = dot8_add(wv[u][i], xf, acc[i]);
          }
        }
      }
      for (; kk < K; kk += step) {
        float xf[8];
        unpack8(*reinterpret_cast<const uint4 *>(xr + kk), xf);
#pragma unroll
        for (unsigned i = 0; i < P_PER; i++) {
          if (fg + i < nrows) acc[i] = dot8_add(*reinterpret_cast<const uint4 *>(Wg + (size_t)i * K + kk), xf, acc[i]);
        }
      }
    } else {
      for (unsigned kk = lane; kk < K; kk += P_LANES) {
        const float xv = bf16_to_f32(xr[kk]);
#pragma unroll
        for (unsigned i = 0; i < P_PER; i++)
          if (fg + i < nrows) acc[i] = fmaf(bf16_to_f32(Wg[(size_t)i * K + kk]), xv, acc[i]);
      }
    }
  }
#pragma unroll
  for (unsigned i = 0; i < P_PER; i++) part[g * P_PER + i][lane] = acc[i];
  __syncthreads();
  if (threadIdx.x < P_FEAT && f0 + threadIdx.x < nrows) {
    float s = 0.0f;
    for (unsigned l = 0; l < P_LANES; l++) s += part[threadIdx.x][l];
    if (F32_OUT)
      static_cast<float *>(out)[f0 + threadIdx.x] = s;
    else
      static_cast<bf16 *>(out)[f0 + threadIdx.x] = f32_to_bf16(s);
  }
}

constexpr unsigned kTopkBlock = mk_block("moe_topk");

/* Ranks candidates by (p descending, expert id ascending). */
__device__ __forceinline__ bool ranks_before(float pa, int a, float pb, int b) {
  return pa > pb || (pa == pb && a < b);
}
}  // namespace

MK_KERNEL(moe_topk)(int *__restrict__ idx, float *__restrict__ w, const float *__restrict__ logits,
                    unsigned t, unsigned e, unsigned ld, unsigned k, unsigned norm) {
  __shared__ float red_p[kTopkBlock];
  __shared__ int red_i[kTopkBlock];
  __shared__ float red[kTopkBlock];
  const unsigned tok = blockIdx.x;
  if (tok >= t || e == 0) return;
  const float *l = logits + (size_t)tok * ld; /* [E] */
  const unsigned tid = threadIdx.x;

  /* softmax in fp32: max, then the sum of exp(l - max) */
  float mx = -INFINITY;
  for (unsigned i = tid; i < e; i += kTopkBlock) mx = fmaxf(mx, l[i]);
  red[tid] = mx;
  __syncthreads();
  for (unsigned s = kTopkBlock / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float part = 0.0f;
  for (unsigned i = tid; i < e; i += kTopkBlock) part += expf(l[i] - mx);
  const float sum = block_sum<kTopkBlock>(part, red);

  /* Selection without scratch: pick j is the best candidate ranked strictly after pick
   * j-1, so k passes over E need no list of chosen experts. */
  int *ti = idx + (size_t)tok * k;
  float *tw = w + (size_t)tok * k;
  float prev_p = 0.0f, wsum = 0.0f;
  int prev = -1; /* -1: no pick yet */
  for (unsigned j = 0; j < k; j++) {
    float best_p = 0.0f;
    int best = -1;
    for (unsigned i = tid; i < e; i += kTopkBlock) {
      const float p = expf(l[i] - mx) / sum;
      if (prev >= 0 && !ranks_before(prev_p, prev, p, (int)i)) continue;
      if (best < 0 || ranks_before(p, (int)i, best_p, best)) {
        best = (int)i;
        best_p = p;
      }
    }
    red_p[tid] = best_p;
    red_i[tid] = best;
    __syncthreads();
    for (unsigned s = kTopkBlock / 2; s > 0; s >>= 1) {
      if (tid < s) {
        const int bi = red_i[tid + s];
        if (bi >= 0 && (red_i[tid] < 0 || ranks_before(red_p[tid + s], bi, red_p[tid], red_i[tid]))) {
          red_p[tid] = red_p[tid + s];
          red_i[tid] = bi;
        }
      }
      __syncthreads();
    }
    best = red_i[0];
    best_p = red_p[0];
    __syncthreads();
    if (best < 0) { /* k > E: the remaining picks are empty */
      for (unsigned r = j + tid; r < k; r += kTopkBlock) {
        ti[r] = -1;
        tw[r] = 0.0f;
      }
      break;
    }
    if (tid == 0) {
      ti[j] = best;
      tw[j] = best_p;
    }
    wsum += best_p;
    prev = best;
    prev_p = best_p;
  }
  if (norm && wsum > 0.0f && tid == 0)
    for (unsigned j = 0; j < k; j++) tw[j] /= wsum;
}
MK_CHECK(moe_topk, moe);

MK_KERNEL(moe_gate_up)(bf16 *__restrict__ gu, const bf16 *__restrict__ x,
                       const int *__restrict__ idx, const bf16 *__restrict__ w, unsigned r,
                       unsigned k, unsigned h, unsigned n) {
  const unsigned j = blockIdx.x; /* routed row: token j / k, expert idx[j] */
  if (j >= r || k == 0) return;
  project_row<false>(gu + (size_t)j * n, w, idx[j], n, x + (size_t)(j / k) * h, h,
                     blockIdx.y * P_FEAT);
}
MK_CHECK(moe_gate_up, moe);

MK_KERNEL(moe_down)(float *__restrict__ y, const bf16 *__restrict__ act,
                    const int *__restrict__ idx, const bf16 *__restrict__ w, unsigned r,
                    unsigned h, unsigned n) {
  const unsigned j = blockIdx.x;
  if (j >= r) return;
  project_row<true>(y + (size_t)j * h, w, idx[j], h, act + (size_t)j * n, n, blockIdx.y * P_FEAT);
}
MK_CHECK(moe_down, moe);

MK_KERNEL(moe_combine)(bf16 *__restrict__ out, const bf16 *__restrict__ res,
                       const float *__restrict__ y, const float *__restrict__ w,
                       const bf16 *__restrict__ shared, const float *__restrict__ gate,
                       unsigned t, unsigned k, unsigned h, unsigned ld, unsigned col) {
  const unsigned tok = blockIdx.x;
  if (tok >= t) return;
  const float sg = sigmoid_f(gate[(size_t)tok * ld + col]); /* shared expert gate */
  const float *tw = w + (size_t)tok * k;                     /* [k] */
  for (unsigned f = threadIdx.x; f < h; f += blockDim.x) {
    const size_t o = (size_t)tok * h + f;
    float acc = bf16_to_f32(res[o]); /* the reference's order: res, experts, shared */
    for (unsigned j = 0; j < k; j++) acc += tw[j] * y[((size_t)tok * k + j) * h + f];
    acc += sg * bf16_to_f32(shared[o]);
    out[o] = f32_to_bf16(acc);
  }
}
MK_CHECK(moe_combine, moe);

namespace {
constexpr unsigned kTopkWBlock = mk_block("moe_topk_warp");
constexpr unsigned TW_LANES = 32; /* shuffle groups: width 32 also on 64-lane wavefronts */
constexpr unsigned TW_GROUPS = kTopkWBlock / TW_LANES;
constexpr unsigned TW_CACHE = 4; /* candidates a thread keeps in registers: E <= 4*256 */
static_assert(TW_GROUPS * TW_LANES == kTopkWBlock && TW_GROUPS <= TW_LANES, "topk groups");

/* A candidate: p, then the expert id; none = (-1, INT_MAX), ranked after every real one. */
struct cand {
  float p;
  int i;
};

__device__ __forceinline__ cand better(cand a, cand b) {
  return ranks_before(b.p, b.i, a.p, a.i) ? b : a;
}

__device__ __forceinline__ cand group_best(cand c) {
#pragma unroll
  for (unsigned off = TW_LANES / 2; off > 0; off >>= 1) {
    cand o;
    o.p = __shfl_xor_sync(0xffffffffu, c.p, off, TW_LANES);
    o.i = __shfl_xor_sync(0xffffffffu, c.i, off, TW_LANES);
    c = better(c, o);
  }
  return c;
}

__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (unsigned off = TW_LANES / 2; off > 0; off >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off, TW_LANES));
  return v;
}

__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (unsigned off = TW_LANES / 2; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off, TW_LANES);
  return v;
}

/* A value another block of this grid wrote, from L2 (HIP: through a volatile read). */
__device__ __forceinline__ float load_other(const float *p) {
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  return __ldcg(p);
#else
  return *reinterpret_cast<const volatile float *>(p);
#endif
}

/* The softmax's first two passes over a token's logits l [E], for a thread that holds experts
 * first + STRIDE c: lc[c] their logits (-inf past E), returned: the thread's maximum
 * (experts past N of them read again from l).  FROM_L2: the logits were written by other blocks
 * of this grid (load_other), and the caller holds every expert (E <= N STRIDE). */
template <unsigned N, unsigned STRIDE, bool FROM_L2 = false>
__device__ __forceinline__ float load_max(float (&lc)[N], const float *__restrict__ l, unsigned e, unsigned first) {
  float mx = -INFINITY;
#pragma unroll
  for (unsigned c = 0; c < N; c++) {
    const unsigned i = first + c * STRIDE;
    lc[c] = i < e ? (FROM_L2 ? load_other(l + i) : l[i]) : -INFINITY;
    mx = fmaxf(mx, lc[c]);
  }
  if (!FROM_L2)
    for (unsigned i = first + N * STRIDE; i < e; i += STRIDE) mx = fmaxf(mx, l[i]);
  return mx;
}
/* lc[c] = e^(lc[c] - mx) for the experts that exist, returned: their sum and that of the ones
 * past N, in this order */
template <unsigned N, unsigned STRIDE>
__device__ __forceinline__ float exp_sum(float (&lc)[N], const float *__restrict__ l, unsigned e, unsigned first,
                                         float mx) {
  float part = 0.0f;
#pragma unroll
  for (unsigned c = 0; c < N; c++)
    if (first + c * STRIDE < e) {
      lc[c] = expf(lc[c] - mx);
      part += lc[c];
    }
  for (unsigned i = first + N * STRIDE; i < e; i += STRIDE) part += expf(l[i] - mx);
  return part;
}

/* A token's picks as the top-k kernels make them, one a round: the last pick (the next ranks
 * after it), the sum of the weights in pick order and how many were taken.  Slot s (s < 32: a
 * thread of those the token's picks are known to) keeps pick j = s mod 32 of the current round
 * in registers and stores the round when the next begins; finish() stores the last round,
 * divided by the sum when norm, and the empty picks (k > E).  For k <= 32 (the router's k = 10)
 * that is one store a slot and no reads back (the picks written one by one and divided after
 * a read back took ~5 us of moe_topk_warp's 8 for one token on the H200). */
struct picks {
  int *ti;
  float *tw;
  cand prev;
  float wsum;
  unsigned n;
  int mi;   /* this slot's pick of the current round */
  float mp; /* its p */
  __device__ __forceinline__ picks(int *idx, float *w, size_t tok, unsigned k)
      : ti(idx + tok * k), tw(w + tok * k), prev{0.0f, -1}, wsum(0.0f), n(0), mi(-1), mp(0.0f) {}
  /* the next pick is best (a candidate, p >= 0) */
  __device__ __forceinline__ void take(cand best, unsigned slot) {
    if (n % TW_LANES == 0 && n > 0 && slot < TW_LANES) {
      ti[n - TW_LANES + slot] = mi;
      tw[n - TW_LANES + slot] = mp;
    }
    if (n % TW_LANES == slot) {
      mi = best.i;
      mp = best.p;
    }
    wsum += best.p;
    prev = best;
    n++;
  }
  __device__ __forceinline__ void finish(unsigned k, unsigned norm, unsigned slot) {
    if (slot >= TW_LANES) return;
    const unsigned base = n == 0 ? 0 : (n - 1) / TW_LANES * TW_LANES, q = base + slot;
    const bool scale = norm && wsum > 0.0f;
    if (q < n) {
      ti[q] = mi;
      tw[q] = scale ? mp / wsum : mp;
    }
    if (scale)
      for (unsigned r = slot; r < base; r += TW_LANES) tw[r] /= wsum; /* rounds stored before (k > 32) */
    for (unsigned r = n + slot; r < k; r += TW_LANES) {
      ti[r] = -1;
      tw[r] = 0.0f;
    }
  }
};
}  // namespace

/* One block a token.  p is computed once into registers (candidate c of thread tid is
 * expert tid + 256c); each pick is a shuffle reduction within groups of 32 and one
 * barrier to merge the 8 group winners (slots alternate, so one barrier a pick). */
MK_KERNEL(moe_topk_warp)(int *__restrict__ idx, float *__restrict__ w,
                         const float *__restrict__ logits, unsigned t, unsigned e, unsigned ld,
                         unsigned k, unsigned norm) {
  __shared__ float red[TW_GROUPS];
  __shared__ cand win[2][TW_GROUPS];
  const unsigned tok = blockIdx.x;
  if (tok >= t || e == 0) return;
  const float *l = logits + (size_t)tok * ld; /* [E] */
  const unsigned tid = threadIdx.x, g = tid / TW_LANES, lane = tid % TW_LANES;

  float lc[TW_CACHE];
  float mx = group_max(load_max<TW_CACHE, kTopkWBlock>(lc, l, e, tid));
  if (lane == 0) red[g] = mx;
  __syncthreads();
  mx = red[0];
  for (unsigned q = 1; q < TW_GROUPS; q++) mx = fmaxf(mx, red[q]);
  __syncthreads(); /* red is reused for the sum */

  const float part = group_sum(exp_sum<TW_CACHE, kTopkWBlock>(lc, l, e, tid, mx));
  if (lane == 0) red[g] = part;
  __syncthreads();
  float sum = 0.0f;
  for (unsigned q = 0; q < TW_GROUPS; q++) sum += red[q];
#pragma unroll
  for (unsigned c = 0; c < TW_CACHE; c++) lc[c] = lc[c] / sum; /* p; beyond E unused */

  picks pk(idx, w, tok, k);
  for (unsigned j = 0; j < k; j++) {
    const cand prev = pk.prev;
    cand best = {-1.0f, 0x7fffffff};
#pragma unroll
    for (unsigned c = 0; c < TW_CACHE; c++) {
      const unsigned i = tid + c * kTopkWBlock;
      const cand x = {lc[c], (int)i};
      if (i < e && (prev.i < 0 || ranks_before(prev.p, prev.i, x.p, x.i))) best = better(best, x);
    }
    for (unsigned i = tid + TW_CACHE * kTopkWBlock; i < e; i += kTopkWBlock) {
      const cand x = {expf(l[i] - mx) / sum, (int)i};
      if (prev.i < 0 || ranks_before(prev.p, prev.i, x.p, x.i)) best = better(best, x);
    }
    best = group_best(best);
    if (lane == 0) win[j & 1][g] = best;
    __syncthreads();
    best = win[j & 1][0];
    for (unsigned q = 1; q < TW_GROUPS; q++) best = better(best, win[j & 1][q]);
    if (best.p < 0.0f) break; /* none left: k > E */
    pk.take(best, tid);
  }
  pk.finish(k, norm, tid);
}
MK_CHECK(moe_topk_warp, moe);

namespace {
constexpr unsigned kTopkRBlock = mk_block("moe_topk_rows");
constexpr unsigned TR_TOKENS = kTopkRBlock / TW_LANES; /* a warp a token */
constexpr unsigned TR_CACHE = 16;                      /* p a lane keeps in registers: E <= 512 */
static_assert(TR_TOKENS * TW_LANES == kTopkRBlock, "whole warps");

/* The largest (MAX) or smallest of a 32-lane group's values: one redux instruction on NVIDIA
 * from sm_80, a shuffle tree elsewhere (HIP's 64-lane wavefronts: groups of 32 by the width). */
template <bool MAX> __device__ __forceinline__ uint32_t group_pick_u32(uint32_t v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIPCC__)
  return MAX ? __reduce_max_sync(0xffffffffu, v) : __reduce_min_sync(0xffffffffu, v);
#else
#pragma unroll
  for (unsigned off = TW_LANES / 2; off > 0; off >>= 1) {
    const uint32_t o = __shfl_xor_sync(0xffffffffu, v, off, TW_LANES);
    v = (MAX ? o > v : o < v) ? o : v;
  }
  return v;
#endif
}

/* A candidate's rank key for E <= 512: 0 for none (past E, taken, or p not a number, which
 * ranks_before never prefers), else p's bits + 1, so that p = 0 ranks above none.  p >= 0
 * (e^x / sum), and for p >= 0 the bits order as the values do; p == 0 covers -0. */
__device__ __forceinline__ uint32_t rank_key(float p) {
  return p > 0.0f ? __float_as_uint(p) + 1u : p == 0.0f ? 1u : 0u;
}

/* E <= 512: lane l holds experts l + 32 c (c < 16) as rank keys; a pick is the group's largest
 * key (ties: the lowest expert id, found by a second reduction over the lanes that hold the
 * largest key), and only then does the lane that held it take it out.  Ties and order as
 * ranks_before's: within a lane a lower c is a lower id. */
__device__ __forceinline__ void picks_cached(picks &pk, const float (&p)[TR_CACHE], unsigned e, unsigned k,
                                             unsigned lane) {
  uint32_t key[TR_CACHE];
#pragma unroll
  for (unsigned c = 0; c < TR_CACHE; c++) key[c] = lane + c * TW_LANES < e ? rank_key(p[c]) : 0u;
  for (unsigned j = 0; j < k; j++) {
    /* the lane's best: a tree over neighbouring ranges of c, so that the left range always
     * holds the lower c and keeps the best on equal keys */
    uint32_t bk[TR_CACHE], bc[TR_CACHE];
#pragma unroll
    for (unsigned c = 0; c < TR_CACHE; c++) {
      bk[c] = key[c];
      bc[c] = c;
    }
#pragma unroll
    for (unsigned s = 1; s < TR_CACHE; s *= 2)
#pragma unroll
      for (unsigned c = 0; c < TR_CACHE; c += 2 * s) {
        const bool right = bk[c + s] > bk[c];
        bk[c] = right ? bk[c + s] : bk[c];
        bc[c] = right ? bc[c + s] : bc[c];
      }
    const uint32_t m = group_pick_u32<true>(bk[0]);
    if (m == 0u) return; /* no candidate left: k > E (or p not a number) */
    const uint32_t i = group_pick_u32<false>(bk[0] == m ? lane + bc[0] * TW_LANES : 0xffffffffu);
    pk.take(cand{__uint_as_float(m - 1u), (int)i}, lane);
    if (i % TW_LANES == lane) {
#pragma unroll
      for (unsigned c = 0; c < TR_CACHE; c++)
        if (c == i / TW_LANES) key[c] = 0u;
    }
  }
}

/* p = softmax(l [e]) for a warp a token, lane l holding experts l + 32 c (c < 16) in lc; mx and
 * sum are the maximum and the sum it took (the experts past 512 are read again by the caller). */
template <bool FROM_L2>
__device__ __forceinline__ void token_probs(float (&lc)[TR_CACHE], float &mx, float &sum, const float *__restrict__ l,
                                            unsigned e, unsigned lane) {
  mx = group_max(load_max<TR_CACHE, TW_LANES, FROM_L2>(lc, l, e, lane));
  sum = group_sum(exp_sum<TR_CACHE, TW_LANES>(lc, l, e, lane, mx));
#pragma unroll
  for (unsigned c = 0; c < TR_CACHE; c++) lc[c] = lc[c] / sum; /* p; beyond E unused */
}
}  // namespace

/* A warp a token, no barriers: the softmax's maximum and sum are shuffle reductions over the
 * warp (moe_topk_warp merges 8 warps' winners through shared memory with a barrier a pick).
 * Lane l holds experts l + 32 c (c < 16) in registers; for E <= 512 the picks are
 * picks_cached's, otherwise each pick is a tree over the cached ones plus the experts past 512
 * recomputed, kept out by ranking after the previous pick, as in moe_topk_warp. */
MK_KERNEL(moe_topk_rows)(int *__restrict__ idx, float *__restrict__ w, const float *__restrict__ logits,
                         unsigned t, unsigned e, unsigned ld, unsigned k, unsigned norm) {
  mk_allow_next(); /* the routed gate and up rows after it, an early-start launch, become resident
                    * while the top-k runs: layer decode 1 / 2 -0.6 to -1 us on the H200
                    * (docs/perf-decode.md section 29) */
  const unsigned lane = threadIdx.x % TW_LANES;
  const unsigned tok = blockIdx.x * TR_TOKENS + threadIdx.x / TW_LANES;
  if (tok >= t || e == 0) return;
  const float *l = logits + (size_t)tok * ld; /* [E] */
  float lc[TR_CACHE], mx, sum;
  token_probs<false>(lc, mx, sum, l, e, lane);
  picks pk(idx, w, tok, k);
  if (e <= TR_CACHE * TW_LANES) {
    picks_cached(pk, lc, e, k, lane);
    pk.finish(k, norm, lane);
    return;
  }
  unsigned taken = 0; /* bit c: expert lane + 32 c was picked */
  for (unsigned j = 0; j < k; j++) {
    const cand prev = pk.prev;
    cand cs[TR_CACHE];
#pragma unroll
    for (unsigned c = 0; c < TR_CACHE; c++) {
      const unsigned i = lane + c * TW_LANES;
      cs[c] = i < e && !((taken >> c) & 1u) ? cand{lc[c], (int)i} : cand{-1.0f, 0x7fffffff};
    }
    static_assert(TR_CACHE == 16, "a tree of 4 levels");
#pragma unroll
    for (unsigned c = 0; c < 8; c++) cs[c] = better(cs[c], cs[c + 8]);
#pragma unroll
    for (unsigned c = 0; c < 4; c++) cs[c] = better(cs[c], cs[c + 4]);
#pragma unroll
    for (unsigned c = 0; c < 2; c++) cs[c] = better(cs[c], cs[c + 2]);
    cand best = better(cs[0], cs[1]);
    for (unsigned i = lane + TR_CACHE * TW_LANES; i < e; i += TW_LANES) {
      const cand x = {expf(l[i] - mx) / sum, (int)i};
      if (prev.i < 0 || ranks_before(prev.p, prev.i, x.p, x.i)) best = better(best, x);
    }
    best = group_best(best);
    if (best.p < 0.0f) break; /* none left: k > E */
    pk.take(best, lane);
    if ((unsigned)best.i < TR_CACHE * TW_LANES && (unsigned)best.i % TW_LANES == lane)
      taken |= 1u << ((unsigned)best.i / TW_LANES);
  }
  pk.finish(k, norm, lane);
}
MK_CHECK(moe_topk_rows, moe);

namespace {
constexpr unsigned kRouterBlock = mk_block("moe_router_topk_rows");
static_assert(kRouterBlock == kGemvBlock, "the router's gemv runs at the gemv's block size");
constexpr unsigned RT_ROWS = kRouterBlock / TW_LANES; /* warps: the top-k's tokens a round */

}  // namespace

/* gemv_bf16_f32's one-row blocks, a grid row a token (its sums, 8 weight loads a lane in flight:
 * the gemv's own grid of ceil(n/8) blocks, 4 rows a pass, took 27-28 us for the router at decode
 * 8 on the H200), then a ticket: the block that takes the last one (atomicInc wraps the count
 * back to 0 for the next launch) waits for no one, since every other block wrote its logits and
 * fenced before its ticket, and makes the top-k as moe_topk_rows does, a warp a token: the same
 * p, picks and stores, so the same bits.  At decode 1 the top-k's launch of its own took 5.6-5.9
 * us under ncu for ~1.5 us of work (docs/perf-moe.md). */
MK_KERNEL(moe_router_topk_rows)(float *__restrict__ logits, int *__restrict__ idx, float *__restrict__ w,
                                const bf16 *__restrict__ x, const bf16 *__restrict__ wr, unsigned *__restrict__ count,
                                unsigned m, unsigned n, unsigned h, unsigned e, unsigned k, unsigned norm) {
  const unsigned row = blockIdx.y; /* a block 8 logits of one token: 8 weight rows in flight a warp */
  if (row < m) gemv_rows<bf16, true>(logits + (size_t)row * n, x + (size_t)row * h, wr, 1u, n, h);
  __shared__ unsigned last;
  __threadfence(); /* this block's logits before its ticket */
  __syncthreads();
  const unsigned blocks = gridDim.x * gridDim.y;
  if (threadIdx.x == 0) last = atomicInc(count, blocks - 1u) == blocks - 1u;
  __syncthreads();
  if (!last) return;
  __threadfence(); /* the other blocks' logits: each fenced them before its ticket */
  const unsigned lane = threadIdx.x % TW_LANES;
  if (e == 0 || e > TR_CACHE * TW_LANES) return;
  for (unsigned tok = threadIdx.x / TW_LANES; tok < m; tok += RT_ROWS) { /* a warp a token */
    float lc[TR_CACHE], mx, sum;
    token_probs<true>(lc, mx, sum, logits + (size_t)tok * n, e, lane);
    picks pk(idx, w, tok, k);
    picks_cached(pk, lc, e, k, lane);
    pk.finish(k, norm, lane);
  }
}
MK_CHECK(moe_router_topk_rows, moe);

namespace {
constexpr unsigned kCombineWBlock = mk_block("moe_combine_wide");
}

/* One thread per (token, feature): at decode the features fill the GPU, not one block.  The
 * first kCombineAhead experts' rows are loaded before any is summed (a loop that loads as it
 * sums waits one memory latency an expert: the 4096-token chunks of a prefill read 335 MB
 * here at ~2.7 TB/s that way); the sum keeps moe_combine's order. */
constexpr unsigned kCombineAhead = 16;
MK_KERNEL(moe_combine_wide)(bf16 *__restrict__ out, const bf16 *__restrict__ res,
                            const float *__restrict__ y, const float *__restrict__ w,
                            const bf16 *__restrict__ shared, const float *__restrict__ gate,
                            unsigned t, unsigned k, unsigned h, unsigned ld, unsigned col) {
  const unsigned tok = blockIdx.x, f = blockIdx.y * kCombineWBlock + threadIdx.x;
  if (tok >= t || f >= h) return;
  const float *tw = w + (size_t)tok * k;               /* [k] */
  const float *ty = y + (size_t)tok * k * h + f;       /* column f of [k, H] */
  const size_t o = (size_t)tok * h + f;
  float yv[kCombineAhead], wv[kCombineAhead];
#pragma unroll
  for (unsigned j = 0; j < kCombineAhead; j++)
    if (j < k) yv[j] = __ldg(ty + (size_t)j * h), wv[j] = __ldg(tw + j);
  const float g = __ldg(gate + (size_t)tok * ld + col), sh = bf16_to_f32(shared[o]);
  float acc = bf16_to_f32(res[o]); /* moe_combine's order: res, experts, shared */
#pragma unroll
  for (unsigned j = 0; j < kCombineAhead; j++)
    if (j < k) acc += wv[j] * yv[j];
  for (unsigned j = kCombineAhead; j < k; j++) acc += tw[j] * ty[(size_t)j * h];
  acc += sigmoid_f(g) * sh;
  out[o] = f32_to_bf16(acc);
}
MK_CHECK(moe_combine_wide, moe);
/* Two features a thread, so that each load brings 4 bytes of y as moe_combine_wide's do (with
 * 2-byte loads the kernel kept half the bytes in flight and ran slower than on f32 y); odd H
 * takes the features one at a time. */
MK_KERNEL(moe_combine_wide_bf16)(bf16 *__restrict__ out, const bf16 *__restrict__ res,
                                 const bf16 *__restrict__ y, const float *__restrict__ w,
                                 const bf16 *__restrict__ shared, const float *__restrict__ gate,
                                 unsigned t, unsigned k, unsigned h, unsigned ld, unsigned col) {
  const unsigned tok = blockIdx.x, f = 2u * (blockIdx.y * kCombineWBlock + threadIdx.x);
  if (tok >= t || f >= h) return;
  const bool two = h % 2u == 0 && ((uintptr_t)y & 3u) == 0 && ((uintptr_t)res & 3u) == 0 &&
                   ((uintptr_t)shared & 3u) == 0 && ((uintptr_t)out & 3u) == 0;
  if (!two) {
    for (unsigned i = 0; i < 2u && f + i < h; i++) {
      const size_t o = (size_t)tok * h + f + i;
      float acc = bf16_to_f32(res[o]);
      for (unsigned j = 0; j < k; j++) acc += w[(size_t)tok * k + j] * bf16_to_f32(y[((size_t)tok * k + j) * h + f + i]);
      acc += sigmoid_f(gate[(size_t)tok * ld + col]) * bf16_to_f32(shared[o]);
      out[o] = f32_to_bf16(acc);
    }
    return;
  }
  const float *tw = w + (size_t)tok * k;                                        /* [k] */
  const uint32_t *ty = reinterpret_cast<const uint32_t *>(y + (size_t)tok * k * h + f); /* columns f, f+1 of [k, H] */
  const size_t o = (size_t)tok * h + f, hw = h / 2u;
  uint32_t yv[kCombineAhead];
  float wv[kCombineAhead];
#pragma unroll
  for (unsigned j = 0; j < kCombineAhead; j++)
    if (j < k) yv[j] = __ldg(ty + (size_t)j * hw), wv[j] = __ldg(tw + j);
  const float g = sigmoid_f(__ldg(gate + (size_t)tok * ld + col));
  const uint32_t r2 = *reinterpret_cast<const uint32_t *>(res + o), s2 = *reinterpret_cast<const uint32_t *>(shared + o);
  auto lo = [](uint32_t v) { return __uint_as_float(v << 16); };
  auto hi = [](uint32_t v) { return __uint_as_float(v & 0xffff0000u); };
  float a0 = lo(r2), a1 = hi(r2); /* moe_combine's order: res, experts, shared */
#pragma unroll
  for (unsigned j = 0; j < kCombineAhead; j++)
    if (j < k) a0 += wv[j] * lo(yv[j]), a1 += wv[j] * hi(yv[j]);
  for (unsigned j = kCombineAhead; j < k; j++) {
    const uint32_t v = ty[(size_t)j * hw];
    a0 += tw[j] * lo(v), a1 += tw[j] * hi(v);
  }
  a0 += g * lo(s2), a1 += g * hi(s2);
  *reinterpret_cast<uint32_t *>(out + o) = (uint32_t)f32_to_bf16(a0) | ((uint32_t)f32_to_bf16(a1) << 16);
}
MK_CHECK(moe_combine_wide_bf16, moe);
static_assert(mk_block("moe_combine_wide_bf16") == kCombineWBlock, "2 features a thread: grid (T, ceil(H/512))");

/* ---- the routed rows at decode: moe_gate_up_silu_rows, moe_down_rows ------------------ *
 * A group of 32 lanes (a warp on NVIDIA; shuffles of width 32 on 64-lane wavefronts) dots NR
 * weight rows with one activation row: each lane takes 16-byte chunks lane, lane + 32, ... of
 * every row and issues U chunks of each row before it uses any (NR * U loads in flight), then
 * the lanes' sums meet in a shuffle tree.  Without the block fence after the loads ptxas
 * interleaves them with the products, about two of a lane's loads in flight (the shared
 * expert's gate and up at decode 1, 64 blocks: 6.5 us without the fence, 5.0-5.4 with it;
 * docs/perf-moe.md).  Gate and up take two steps of 8 loads (U = 4, 64 registers: four blocks
 * an SM; 16 loads at once needed 102 registers, two blocks an SM, and were slower at decode 32).
 * Down takes one load a row a step (U = 1: 48 registers, five blocks an SM, so decode 1's 640
 * blocks are one wave; U = 2 had 64, four an SM: layer decode 1 / 2 / 8 64.4 / 89.4 / 205.4 us
 * against 65.5 / 90.4 / 206.2 on the H200, docs/bench/h200-2026-12-04-topk).
 * At decode 1 (10 rows, 512 experts' width) gate and up are 640 blocks of 64 KiB of weights,
 * down 640 of 32 KiB, where moe_gate_up's 160 blocks of 256 KiB put two on some of the 132
 * SMs and one on the rest.  The shared expert's gate and up take the same kernel without a list
 * (op_gate_up_silu, up to 12 rows). */
namespace {
constexpr unsigned kRowsBlock = mk_block("moe_gate_up_silu_rows");
static_assert(kRowsBlock == mk_block("moe_down_rows"), "one block size for the decode rows");
constexpr unsigned RW_LANES = TW_LANES;                /* lanes a weight row */
constexpr unsigned RW_GROUPS = kRowsBlock / RW_LANES;  /* 8: act columns a gate_up block */
constexpr unsigned RW_DOWN = 4;                        /* output features a down group */
static_assert(RW_GROUPS * RW_LANES == kRowsBlock, "whole groups");
static_assert(RW_GROUPS * 2u == 16u && RW_DOWN == 4u && RW_GROUPS * RW_DOWN == 32u, "the grids of kernels.def");

/* acc[i] = w[i][0:K] . xr[0:K] for the calling group, summed over the group (every lane gets
 * the sums).  vec: K % 8 == 0 and w[i], xr 16-byte aligned. */
template <unsigned NR, unsigned U>
__device__ __forceinline__ void dot_rows(float (&acc)[NR], const bf16 *const (&w)[NR], const bf16 *__restrict__ xr,
                                         unsigned K, unsigned lane, bool vec) {
#pragma unroll
  for (unsigned i = 0; i < NR; i++) acc[i] = 0.0f;
  if (vec) {
    constexpr unsigned step = RW_LANES * 8u;
    unsigned kk = lane * 8u;
    for (; kk + (U - 1u) * step < K; kk += U * step) {
      uint4 wv[NR][U];
#pragma unroll
      for (unsigned i = 0; i < NR; i++)
#pragma unroll
        for (unsigned u = 0; u < U; u++) wv[i][u] = load_stream16(w[i] + kk + u * step);
      __threadfence_block(); /* every load issued before the first product (above) */
#pragma unroll
      for (unsigned u = 0; u < U; u++) {
        float xf[8];
        unpack8(*reinterpret_cast<const uint4 *>(xr + kk + u * step), xf);
#pragma unroll
        for (unsigned i = 0; i < NR; i++) acc[i] = dot8_add(wv[i][u], xf, acc[i]);
      }
    }
    for (; kk < K; kk += step) {
      float xf[8];
      unpack8(*reinterpret_cast<const uint4 *>(xr + kk), xf);
#pragma unroll
      for (unsigned i = 0; i < NR; i++) acc[i] = dot8_add(load_stream16(w[i] + kk), xf, acc[i]);
    }
  } else {
    for (unsigned kk = lane; kk < K; kk += RW_LANES) {
      const float xv = bf16_to_f32(xr[kk]);
#pragma unroll
      for (unsigned i = 0; i < NR; i++) acc[i] = fmaf(bf16_to_f32(w[i][kk]), xv, acc[i]);
    }
  }
#pragma unroll
  for (unsigned i = 0; i < NR; i++) acc[i] = group_sum(acc[i]);
}
}  // namespace

/* Group g of block (j, y) makes act[j, c], c = 8 y + g, from gate row c and up row n/2 + c. */
MK_KERNEL(moe_gate_up_silu_rows)(bf16 *__restrict__ act, const bf16 *__restrict__ x,
                                 const int *__restrict__ idx, const bf16 *__restrict__ w, unsigned r,
                                 unsigned k, unsigned h, unsigned n) {
  const unsigned j = blockIdx.x, g = threadIdx.x / RW_LANES, lane = threadIdx.x % RW_LANES;
  const unsigned half = n / 2u, c = blockIdx.y * RW_GROUPS + g;
  mk_allow_next();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIPCC__)
  if (!idx && c < half) { /* one expert, known before the wait: its two rows into L2 */
    const char *gr = reinterpret_cast<const char *>(w + (size_t)c * h),
               *ur = reinterpret_cast<const char *>(w + (size_t)(half + c) * h);
    for (size_t off = (size_t)lane * 128u; off < (size_t)h * sizeof(bf16); off += RW_LANES * 128u) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(gr + off));
      asm volatile("prefetch.global.L2 [%0];" ::"l"(ur + off));
    }
  }
#endif
  mk_wait_prior();
  if (j >= r || k == 0 || c >= half) return;
  const int ex = idx ? idx[j] : 0;
  float acc[2] = {0.0f, 0.0f};
  if (ex >= 0) {
    const bf16 *we = w + (size_t)ex * n * h, *xr = x + (size_t)(j / k) * h;
    const bf16 *const rows[2] = {we + (size_t)c * h, we + (size_t)(half + c) * h};
    const bool vec = h % 8u == 0 && aligned16(w) && aligned16(x);
    dot_rows<2, 4>(acc, rows, xr, h, lane, vec);
  }
  if (lane == 0) act[(size_t)j * half + c] = f32_to_bf16(silu_fast(acc[0]) * acc[1]);
}
MK_CHECK(moe_gate_up_silu_rows, moe);

/* Group g of block (j, y) makes y[j, f .. f + 3], f = 4 (8 y + g); rows past H repeat row f. */
MK_KERNEL(moe_down_rows)(float *__restrict__ y, const bf16 *__restrict__ act, const int *__restrict__ idx,
                         const bf16 *__restrict__ w, unsigned r, unsigned h, unsigned n) {
  const unsigned j = blockIdx.x, g = threadIdx.x / RW_LANES, lane = threadIdx.x % RW_LANES;
  const unsigned f = (blockIdx.y * RW_GROUPS + g) * RW_DOWN;
  mk_allow_next();
  mk_wait_prior();
  if (j >= r || f >= h) return;
  const unsigned nf = h - f < RW_DOWN ? h - f : RW_DOWN;
  const int ex = idx[j];
  float acc[RW_DOWN] = {};
  if (ex >= 0) {
    const bf16 *we = w + (size_t)ex * h * n;
    const bf16 *const rows[RW_DOWN] = {we + (size_t)f * n, we + (size_t)(f + (1u < nf ? 1u : 0u)) * n,
                                       we + (size_t)(f + (2u < nf ? 2u : 0u)) * n,
                                       we + (size_t)(f + (3u < nf ? 3u : 0u)) * n};
    const bool vec = n % 8u == 0 && aligned16(w) && aligned16(act);
    dot_rows<RW_DOWN, 1>(acc, rows, act + (size_t)j * n, n, lane, vec);
  }
#pragma unroll
  for (unsigned i = 0; i < RW_DOWN; i++)
    if (lane == i && i < nf) y[(size_t)j * h + f + i] = acc[i];
}
MK_CHECK(moe_down_rows, moe);

/* ---- grouped expert projections: moe_sort, moe_gate_up_sorted, moe_down_sorted ------- *
 * A prefill routes R = T*k rows to E experts, tens of rows each.  moe_gate_up gives every
 * row its own pass over its expert's weights (R passes over 4 MiB at the 80B-A3B shape);
 * here moe_sort lists the rows by expert in tiles of 64, and each tile is one 64 x 128
 * block of a GEMM against its expert on the tensor cores, so an expert's weights are read
 * once a tile.  NVIDIA only (ballots, mma.sync); HIP keeps the per-row kernels. */
#if !defined(__HIPCC__)
namespace {
constexpr unsigned kSortBlock = mk_block("moe_sort");
static_assert(kSortBlock % 32u == 0 && kSortBlock / 32u <= 32u, "whole warps, one reduction round");
constexpr unsigned kTileRows = 64; /* kernels.def: rows a slot of moe_sort's tiles */

__device__ __forceinline__ uint64_t slot_count(unsigned r, unsigned e) { return ((uint64_t)r + 63u) / 64u + e + 1u; }

/* Slot s of moe_sort's list: (expert, first row in perm, rows), false for an empty slot or one
 * that no moe_sort of r rows and e experts writes (nothing to compute). */
struct slot_t {
  int ex, p, m;
};
__device__ __forceinline__ bool slot_at(uint64_t s, const int *__restrict__ tiles, unsigned r, unsigned e, slot_t &sl) {
  sl.ex = tiles[3 * s], sl.p = tiles[3 * s + 1], sl.m = tiles[3 * s + 2];
  return !(sl.ex < 0 || (unsigned)sl.ex >= e || sl.p < 0 || sl.m <= 0 || sl.m > (int)kTileRows ||
           (uint64_t)sl.p + (uint64_t)sl.m > r);
}
}  // namespace

/* 4 ids of idx from j (those at r or beyond as -1): one 16-byte load where idx is aligned for
 * it and all 4 exist. */
__device__ __forceinline__ void ids4(const int *__restrict__ idx, uint64_t j, unsigned r, bool vec, int (&v)[4]) {
  if (vec && j + 4u <= r) {
    const int4 q = __ldg(reinterpret_cast<const int4 *>(idx + j));
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
#pragma unroll
    for (unsigned i = 0; i < 4; i++) v[i] = j + i < r ? __ldg(idx + j + i) : -1;
  }
}

/* Block x lists expert x: it counts the rows below and of its expert (o_x, c_x: no block
 * waits for another), writes its slots and the empty slots up to the next expert's first,
 * then walks idx in rounds of kSortBlock x kSortRows rows, thread t taking rows [t kSortRows,
 * (t + 1) kSortRows) of a round, placing its hits after those of the threads before it (a
 * block-wide prefix of the counts: stable).  The last block fills perm's tail with -1.  Each
 * block reads idx up to twice (from L2); a round's rows a thread in one go keep the walk to
 * ceil(R / 4096) dependent rounds (it was one a 256 rows: docs/perf-moe.md). */
constexpr unsigned kSortRows = 16;
MK_KERNEL(moe_sort)(int *__restrict__ perm, int *__restrict__ tiles, const int *__restrict__ idx, unsigned r,
                    unsigned e) {
  constexpr unsigned W = kSortBlock / 32u, ROUND = kSortBlock * kSortRows;
  __shared__ unsigned red[2][W], warp_n[W];
  const unsigned x = blockIdx.x, tid = threadIdx.x, lane = tid % 32u, wid = tid / 32u;
  if (x >= e) return;
  const bool vec = (reinterpret_cast<uintptr_t>(idx) & 15u) == 0;
  unsigned lt = 0, eq = 0;
  for (uint64_t j = 4u * tid; j < r; j += 4u * kSortBlock) {
    int v[4];
    ids4(idx, j, r, vec, v);
#pragma unroll
    for (unsigned i = 0; i < 4; i++)
      if (v[i] >= 0 && (unsigned)v[i] < e) lt += (unsigned)v[i] < x, eq += (unsigned)v[i] == x;
  }
#pragma unroll
  for (unsigned off = 16; off > 0; off >>= 1) {
    lt += __shfl_xor_sync(0xffffffffu, lt, off);
    eq += __shfl_xor_sync(0xffffffffu, eq, off);
  }
  if (lane == 0) red[0][wid] = lt, red[1][wid] = eq;
  __syncthreads();
  unsigned o = 0, c = 0;
  for (unsigned i = 0; i < W; i++) o += red[0][i], c += red[1][i];
  const uint64_t first = o / kTileRows + x, mine = (c + kTileRows - 1) / kTileRows;
  const uint64_t next = x + 1 < e ? (uint64_t)(o + c) / kTileRows + x + 1 : slot_count(r, e);
  for (uint64_t t = first + tid; t < next; t += kSortBlock) {
    const uint64_t i = t - first;
    int *tl = tiles + 3 * t;
    if (i < mine) {
      tl[0] = (int)x, tl[1] = (int)(o + kTileRows * i);
      tl[2] = (int)(c - kTileRows * i < kTileRows ? c - kTileRows * i : kTileRows);
    } else {
      tl[0] = -1, tl[1] = 0, tl[2] = 0;
    }
  }
  unsigned pos = o;
  for (uint64_t j0 = 0; j0 < r && pos < o + c; j0 += ROUND) {
    const uint64_t base = j0 + tid * kSortRows;
    int v[kSortRows];
#pragma unroll
    for (unsigned q = 0; q < kSortRows; q += 4) ids4(idx, base + q, r, vec, *reinterpret_cast<int(*)[4]>(v + q));
    unsigned n = 0;
#pragma unroll
    for (unsigned q = 0; q < kSortRows; q++) n += v[q] == (int)x;
    unsigned incl = n; /* the warp's inclusive prefix of the counts */
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
      const unsigned u = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += u;
    }
    if (lane == 31) warp_n[wid] = incl;
    __syncthreads();
    unsigned before = 0, all = 0;
    for (unsigned i = 0; i < W; i++) before += i < wid ? warp_n[i] : 0u, all += warp_n[i];
    unsigned at = pos + before + incl - n;
#pragma unroll
    for (unsigned q = 0; q < kSortRows; q++)
      if (v[q] == (int)x) perm[at++] = (int)(base + q);
    pos += all;
    __syncthreads(); /* warp_n is rewritten next round */
  }
  if (x == e - 1)
    for (unsigned i = o + c + tid; i < r; i += kSortBlock) perm[i] = -1;
}
MK_CHECK(moe_sort, moe);
#endif

#if !defined(__HIPCC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#include "sm80.cuh"
namespace {
constexpr unsigned kGBlock = mk_block("moe_gate_up_sorted");
static_assert(kGBlock == 256 && mk_block("moe_down_sorted") == 256, "8 warps: 2 x 4 warp tiles of 32 x 32");
constexpr unsigned GBM = kTileRows, GBN = 128, GBK = 64, GSTAGES = 3; /* kernels.def: 64 x 128 tiles */
constexpr unsigned GROW = GBK * 2u, GCH = GBK / 8u; /* bytes and 16-byte chunks of a stage row */
constexpr unsigned GA_BYTES = GBM * GROW, GB_BYTES = GBN * GROW, GSTAGE = GA_BYTES + GB_BYTES;
static_assert(mk_shared("moe_gate_up_sorted") == GSTAGES * GSTAGE && mk_shared("moe_down_sorted") == GSTAGES * GSTAGE,
              "kernels.def METRALE_KERNEL_SHARED rows: the ring");
extern __shared__ __align__(128) unsigned char moe_ring[];
/* Chunk c of stage row r, XOR-permuted so that the 8 rows one ldmatrix reads fall in
 * different banks.  k steps of 64 rather than 32: half the barriers a FLOP (H200, layer
 * decode 256: 1804 -> 1325 us; docs/perf-moe.md). */
__device__ __forceinline__ uint32_t gswz(unsigned r, unsigned c) { return r * GROW + ((c ^ (r & 7u)) << 4); }

/* Elements k .. k+7 of the row src [K] (in: the row exists) into the 16 bytes at dst: cp.async
 * where the chunk is whole and aligned (vec), else element by element; zeros outside. */
__device__ __forceinline__ void chunk_in(uint32_t dst, const bf16 *__restrict__ src, bool in, unsigned K, unsigned k,
                                         bool vec) {
  if (vec) {
    sm80::cp_async16(dst, in ? src + k : src, in && k < K ? 16u : 0u);
    return;
  }
  uint32_t v[4] = {0u, 0u, 0u, 0u};
  if (in)
#pragma unroll
    for (unsigned i = 0; i < 8; i++)
      if (k + i < K) v[i / 2] |= (uint32_t)src[k + i] << (16u * (i % 2u));
  sm80::st_shared16(dst, make_uint4(v[0], v[1], v[2], v[3]));
}

/* One slot's 64 x 128 block: out[j, n0..] = w_e [N, K] . a[arow(j)] for the slot's rows j,
 * k steps of 64 through a 3-stage cp.async ring in dynamic shared memory (72 KiB).
 * The activation row of output row j is a[j / div]: the token for gate_up (div = k), the
 * row itself for down (div = 1). */
template <bool F32_OUT>
__device__ __forceinline__ void sorted_tile(void *y, const bf16 *__restrict__ a, unsigned div,
                                            const int *__restrict__ perm, const int *__restrict__ tiles,
                                            const bf16 *__restrict__ w, unsigned r, unsigned K, unsigned N,
                                            unsigned e) {
  __shared__ int rows[GBM]; /* output row of each tile row, -1 past the slot's rows */
  const uint64_t slot = blockIdx.x;
  const unsigned n0 = blockIdx.y * GBN;
  if (slot >= slot_count(r, e) || n0 >= N || div == 0) return;
  slot_t sl;
  if (!slot_at(slot, tiles, r, e, sl)) return;
  const int ex = sl.ex;
  const unsigned tid = threadIdx.x, lane = tid % 32u, warp = tid / 32u, wm = warp / 4u, wn = warp % 4u;
  if (tid < GBM) {
    const int j = (int)tid < sl.m ? perm[sl.p + tid] : -1;
    rows[tid] = j >= 0 && (unsigned)j < r ? j : -1;
  }
  __syncthreads();
  const bf16 *we = w + (size_t)ex * N * K; /* [N, K] */
  const bool vec = K % 8u == 0 && aligned16(a) && aligned16(w);
  const uint32_t s0 = sm80::smem_u32(moe_ring);
  /* this thread's chunks: chunk cc of A rows cr + i RSTEP and of B rows cr + i RSTEP */
  constexpr unsigned RSTEP = kGBlock / GCH; /* rows a pass of the block's threads covers */
  const unsigned cr = tid / GCH, cc = tid % GCH;
  const bf16 *arow[GBM / RSTEP];
  bool ain[GBM / RSTEP];
#pragma unroll
  for (unsigned i = 0; i < GBM / RSTEP; i++) {
    const int aj = rows[cr + i * RSTEP];
    ain[i] = aj >= 0;
    arow[i] = ain[i] ? a + (size_t)((unsigned)aj / div) * K : a;
  }
  auto load = [&](unsigned kt) {
    const uint32_t at = s0 + (kt % GSTAGES) * GSTAGE;
    const unsigned k = kt * GBK + cc * 8u;
#pragma unroll
    for (unsigned i = 0; i < GBM / RSTEP; i++) chunk_in(at + gswz(cr + i * RSTEP, cc), arow[i], ain[i], K, k, vec);
#pragma unroll
    for (unsigned i = 0; i < GBN / RSTEP; i++) {
      const unsigned n = n0 + cr + i * RSTEP;
      chunk_in(at + GA_BYTES + gswz(cr + i * RSTEP, cc), we + (size_t)n * K, n < N, K, k, vec);
    }
  };
  float acc[2][4][4];
#pragma unroll
  for (unsigned i = 0; i < 2; i++)
#pragma unroll
    for (unsigned jn = 0; jn < 4; jn++)
#pragma unroll
      for (unsigned q = 0; q < 4; q++) acc[i][jn][q] = 0.0f;
  const unsigned KT = (K + GBK - 1) / GBK;
#pragma unroll
  for (unsigned s = 0; s + 1 < GSTAGES; s++) {
    if (s < KT) load(s);
    sm80::cp_commit();
  }
  for (unsigned kt = 0; kt < KT; kt++) {
    sm80::cp_wait<GSTAGES - 2>();
    __syncthreads(); /* stage kt landed for everyone; stage kt - 1's reads are done */
    if (kt + GSTAGES - 1 < KT) load(kt + GSTAGES - 1);
    sm80::cp_commit();
    const uint32_t sa = s0 + (kt % GSTAGES) * GSTAGE, sb = sa + GA_BYTES;
#pragma unroll
    for (unsigned kk = 0; kk < GBK; kk += 16) {
      uint32_t b[4][2];
#pragma unroll
      for (unsigned nj = 0; nj < 2; nj++) {
        const unsigned n = wn * 32u + nj * 16u + (lane & 7u) + ((lane >> 4) << 3);
        uint32_t q[4];
        sm80::ldsm_x4(q, sb + gswz(n, kk / 8u + ((lane >> 3) & 1u)));
        b[2 * nj][0] = q[0], b[2 * nj][1] = q[1], b[2 * nj + 1][0] = q[2], b[2 * nj + 1][1] = q[3];
      }
#pragma unroll
      for (unsigned mi = 0; mi < 2; mi++) {
        uint32_t af[4];
        sm80::ldsm_x4(af, sa + gswz(wm * 32u + mi * 16u + (lane & 15u), kk / 8u + (lane >> 4)));
#pragma unroll
        for (unsigned ni = 0; ni < 4; ni++) sm80::mma16816(acc[mi][ni], af, b[ni]);
      }
    }
  }
  sm80::cp_wait<0>();
  const unsigned g = lane >> 2, t = lane & 3u;
  const bool pair = N % 2u == 0 && ((uintptr_t)y & (F32_OUT ? 7u : 3u)) == 0;
#pragma unroll
  for (unsigned mi = 0; mi < 2; mi++)
#pragma unroll
    for (unsigned h = 0; h < 2; h++) {
      const int j = rows[wm * 32u + mi * 16u + g + 8u * h];
      if (j < 0) continue;
#pragma unroll
      for (unsigned ni = 0; ni < 4; ni++) {
        const unsigned col = n0 + wn * 32u + ni * 8u + 2u * t;
        const float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
        const size_t o = (size_t)j * N + col;
        if (F32_OUT) {
          float *yf = static_cast<float *>(y);
          if (pair && col + 1 < N) *reinterpret_cast<float2 *>(yf + o) = make_float2(v0, v1);
          else {
            if (col < N) yf[o] = v0;
            if (col + 1 < N) yf[o + 1] = v1;
          }
        } else {
          bf16 *yb = static_cast<bf16 *>(y);
          if (pair && col + 1 < N)
            *reinterpret_cast<uint32_t *>(yb + o) = bf16x2_rn(v0, v1);
          else {
            if (col < N) yb[o] = f32_to_bf16(v0);
            if (col + 1 < N) yb[o + 1] = f32_to_bf16(v1);
          }
        }
      }
    }
}
}  // namespace

MK_KERNEL(moe_gate_up_sorted)(bf16 *__restrict__ gu, const bf16 *__restrict__ x, const int *__restrict__ perm,
                              const int *__restrict__ tiles, const bf16 *__restrict__ w, unsigned r, unsigned k,
                              unsigned h, unsigned n, unsigned e) {
  sorted_tile<false>(gu, x, k, perm, tiles, w, r, h, n, e);
}
MK_CHECK(moe_gate_up_sorted, moe);

MK_KERNEL(moe_down_sorted)(float *__restrict__ y, const bf16 *__restrict__ act, const int *__restrict__ perm,
                           const int *__restrict__ tiles, const bf16 *__restrict__ w, unsigned r, unsigned h,
                           unsigned n, unsigned e) {
  sorted_tile<true>(y, act, 1u, perm, tiles, w, r, n, h, e);
}
MK_CHECK(moe_down_sorted, moe);
#endif

/* The same projections on Hopper's tensor cores, fed by TMA (moe_ws.cuh).  Only in the sm_90a
 * image, whose tensor-map templates the backend writes when it loads the module. */
#if !defined(__HIPCC__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "sm90a.cuh"
#include "tma_templates.h"
extern "C" {
__device__ __align__(128) unsigned char metrale_tma_templates[METRALE_TMA_COUNT][METRALE_TMA_BYTES];
/* one tensor map an SM for each kernel: [0] gate_up, [1] down */
__device__ __align__(128) unsigned char metrale_moe_ws_maps[2][1024][METRALE_TMA_BYTES];
}
namespace {
#include "moe_ws.cuh"
static_assert(mk_block("moe_gate_up_sorted_ws") == moews::THREADS && mk_block("moe_down_sorted_ws") == moews::THREADS,
              "a producer warpgroup and two consumer warpgroups");
static_assert(mk_shared("moe_gate_up_sorted_ws") == moews::STAGES * moews::STAGE + 1024u &&
                  mk_shared("moe_down_sorted_ws") == mk_shared("moe_gate_up_sorted_ws"),
              "kernels.def METRALE_KERNEL_SHARED rows: the ring plus 1 KiB of alignment");
static_assert(mk_shared("moe_gate_up_sorted_ws") > 114u * 1024u, "one block an SM: a block's map lives in its SM's slot");
static_assert(moews::SLOT == kTileRows, "a block computes two of moe_sort's slots");
}  // namespace
#define MK_KERNEL_MOE_WS(name) extern "C" __global__ void __launch_bounds__(mk_block(#name), 1) name

MK_KERNEL_MOE_WS(moe_gate_up_sorted_ws)(bf16 *__restrict__ gu, const bf16 *__restrict__ x, const int *__restrict__ perm,
                                        const int *__restrict__ tiles, const bf16 *__restrict__ w, unsigned r, unsigned k,
                                        unsigned h, unsigned n, unsigned e) {
  moews::sorted_pair<false>(gu, x, k, perm, tiles, w, r, h, n, e, metrale_moe_ws_maps[0]);
}
MK_CHECK(moe_gate_up_sorted_ws, moe);

MK_KERNEL_MOE_WS(moe_down_sorted_ws)(float *__restrict__ y, const bf16 *__restrict__ act, const int *__restrict__ perm,
                                     const int *__restrict__ tiles, const bf16 *__restrict__ w, unsigned r, unsigned h,
                                     unsigned n, unsigned e) {
  moews::sorted_pair<true>(y, act, 1u, perm, tiles, w, r, n, h, e, metrale_moe_ws_maps[1]);
}
MK_CHECK(moe_down_sorted_ws, moe);

/* gate_up with silu_mul on the way out (act, not gu); it shares gate_up's map slots (they
 * never run at once) */
MK_KERNEL_MOE_WS(moe_gate_up_silu_sorted_ws)(bf16 *__restrict__ act, const bf16 *__restrict__ x,
                                             const int *__restrict__ perm, const int *__restrict__ tiles,
                                             const bf16 *__restrict__ w, unsigned r, unsigned k, unsigned h,
                                             unsigned n, unsigned e) {
  moews::sorted_pair<false, true>(act, x, k, perm, tiles, w, r, h, n, e, metrale_moe_ws_maps[0]);
}
MK_CHECK(moe_gate_up_silu_sorted_ws, moe);
static_assert(mk_block("moe_gate_up_silu_sorted_ws") == moews::THREADS &&
                  mk_shared("moe_gate_up_silu_sorted_ws") == mk_shared("moe_gate_up_sorted_ws"),
              "moe_gate_up_sorted_ws's block and ring");

/* y in bf16 (moe_combine_wide_bf16 reads it); the down kernels share their map slots (they
 * never run at once) */
MK_KERNEL_MOE_WS(moe_down_sorted_ws_bf16)(bf16 *__restrict__ y, const bf16 *__restrict__ act, const int *__restrict__ perm,
                                          const int *__restrict__ tiles, const bf16 *__restrict__ w, unsigned r,
                                          unsigned h, unsigned n, unsigned e) {
  moews::sorted_pair<false>(y, act, 1u, perm, tiles, w, r, n, h, e, metrale_moe_ws_maps[1]);
}
MK_CHECK(moe_down_sorted_ws_bf16, moe);
static_assert(mk_block("moe_down_sorted_ws_bf16") == moews::THREADS &&
                  mk_shared("moe_down_sorted_ws_bf16") == mk_shared("moe_down_sorted_ws"),
              "moe_down_sorted_ws's block and ring");
#endif
