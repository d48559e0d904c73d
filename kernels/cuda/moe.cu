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
            for (unsigned i = 0; i < P_PER; i++) {
              float wf[8];
              unpack8(wv[u][i], wf);
#pragma unroll
              for (unsigned e = 0; e < 8; e++) acc[i] = fmaf(wf[e], xf[e], acc[i]);
            }
          }
        }
      }
      for (; kk < K; kk += step) {
        float xf[8];
        unpack8(*reinterpret_cast<const uint4 *>(xr + kk), xf);
#pragma unroll
        for (unsigned i = 0; i < P_PER; i++) {
          if (fg + i < nrows) {
            float wf[8];
            unpack8(*reinterpret_cast<const uint4 *>(Wg + (size_t)i * K + kk), wf);
#pragma unroll
            for (unsigned e = 0; e < 8; e++) acc[i] = fmaf(wf[e], xf[e], acc[i]);
          }
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
  float mx = -INFINITY;
#pragma unroll
  for (unsigned c = 0; c < TW_CACHE; c++) {
    const unsigned i = tid + c * kTopkWBlock;
    lc[c] = i < e ? l[i] : -INFINITY;
    mx = fmaxf(mx, lc[c]);
  }
  for (unsigned i = tid + TW_CACHE * kTopkWBlock; i < e; i += kTopkWBlock) mx = fmaxf(mx, l[i]);
  mx = group_max(mx);
  if (lane == 0) red[g] = mx;
  __syncthreads();
  mx = red[0];
  for (unsigned q = 1; q < TW_GROUPS; q++) mx = fmaxf(mx, red[q]);
  __syncthreads(); /* red is reused for the sum */

  float part = 0.0f;
#pragma unroll
  for (unsigned c = 0; c < TW_CACHE; c++)
    if (tid + c * kTopkWBlock < e) {
      lc[c] = expf(lc[c] - mx);
      part += lc[c];
    }
  for (unsigned i = tid + TW_CACHE * kTopkWBlock; i < e; i += kTopkWBlock) part += expf(l[i] - mx);
  part = group_sum(part);
  if (lane == 0) red[g] = part;
  __syncthreads();
  float sum = 0.0f;
  for (unsigned q = 0; q < TW_GROUPS; q++) sum += red[q];
#pragma unroll
  for (unsigned c = 0; c < TW_CACHE; c++) lc[c] = lc[c] / sum; /* p; beyond E unused */

  int *ti = idx + (size_t)tok * k;
  float *tw = w + (size_t)tok * k;
  cand prev = {0.0f, -1};
  float wsum = 0.0f;
  for (unsigned j = 0; j < k; j++) {
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
    if (best.p < 0.0f) { /* k > E: the remaining picks are empty */
      for (unsigned r = j + tid; r < k; r += kTopkWBlock) {
        ti[r] = -1;
        tw[r] = 0.0f;
      }
      break;
    }
    if (tid == 0) {
      ti[j] = best.i;
      tw[j] = best.p;
    }
    wsum += best.p;
    prev = best;
  }
  if (norm && wsum > 0.0f && tid == 0)
    for (unsigned j = 0; j < k; j++) tw[j] /= wsum;
}
MK_CHECK(moe_topk_warp, moe);

namespace {
constexpr unsigned kCombineWBlock = mk_block("moe_combine_wide");
}

/* One thread per (token, feature): at decode the features fill the GPU, not one block. */
MK_KERNEL(moe_combine_wide)(bf16 *__restrict__ out, const bf16 *__restrict__ res,
                            const float *__restrict__ y, const float *__restrict__ w,
                            const bf16 *__restrict__ shared, const float *__restrict__ gate,
                            unsigned t, unsigned k, unsigned h, unsigned ld, unsigned col) {
  const unsigned tok = blockIdx.x, f = blockIdx.y * kCombineWBlock + threadIdx.x;
  if (tok >= t || f >= h) return;
  const float sg = sigmoid_f(gate[(size_t)tok * ld + col]);
  const float *tw = w + (size_t)tok * k;               /* [k] */
  const float *ty = y + (size_t)tok * k * h + f;       /* column f of [k, H] */
  const size_t o = (size_t)tok * h + f;
  float acc = bf16_to_f32(res[o]); /* moe_combine's order: res, experts, shared */
  for (unsigned j = 0; j < k; j++) acc += tw[j] * ty[(size_t)j * h];
  acc += sg * bf16_to_f32(shared[o]);
  out[o] = f32_to_bf16(acc);
}
MK_CHECK(moe_combine_wide, moe);
