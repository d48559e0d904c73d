/* The gemv (a block per 8 output features of every row, for the few rows of a decode batch),
 * shared by gemm.cu's gemv kernels and moe.cu's router with its top-k. */
#ifndef METRALE_KERNELS_CUDA_GEMV_CUH
#define METRALE_KERNELS_CUDA_GEMV_CUH

#include "common.cuh"

namespace {
/* y[i] = v as f32, or rounded to bf16 */
template <bool F32_OUT>
__device__ __forceinline__ void store_out(void *y, size_t i, float v) {
  if (F32_OUT)
    static_cast<float *>(y)[i] = v;
  else
    static_cast<bf16 *>(y)[i] = f32_to_bf16(v);
}

/* ---- gemv ------------------------------------------------------------------------ */

constexpr unsigned kGemvBlock = mk_block("gemv_bf16");
static_assert(kGemvBlock == mk_block("gemv_bf16_f32") && kGemvBlock == mk_block("gemv_f32in"),
              "one block size for the gemv kernels");
constexpr unsigned GV_FEAT = 8;                     /* output features per block (contract) */
constexpr unsigned GV_LANES = kGemvBlock / GV_FEAT; /* threads sharing one weight row */
constexpr unsigned GV_ROWS = 16;                    /* activation rows per pass over w */
static_assert(kGemvBlock % GV_FEAT == 0 && GV_FEAT * GV_ROWS <= kGemvBlock, "gemv mapping");

/* 8 activations at p (16-byte aligned), or one. */
__device__ __forceinline__ void x8(const bf16 *p, float f[8]) { unpack8(*reinterpret_cast<const uint4 *>(p), f); }
__device__ __forceinline__ void x8(const float *p, float f[8]) {
  const float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
  f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
  f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
}
__device__ __forceinline__ float x1(const bf16 *p) { return bf16_to_f32(*p); }
__device__ __forceinline__ float x1(const float *p) { return *p; }

/* The decode case (up to 4 rows a pass) with vector loads: each thread issues U
 * independent 16-byte weight loads before it uses any, so an SM keeps enough bytes in
 * flight to stream the weights at copy speed even when the grid is small (out_proj: 256
 * blocks for 132 SMs).  One 16-byte load at a time, as the general loop below does, left
 * in_proj at 1.2 TB/s and out_proj at 1.1 TB/s (docs/perf-decode.md).  One row (batch 1)
 * takes 8 loads, all of an in_proj row's chunks for a thread, and its activation reads
 * have no branch between them (the row count is the template's); more rows keep 4, for
 * registers.  Sums: each lane in kk order, then lanes in order, as gemv_rows, for every
 * R: a row's result does not depend on the batch. */
template <typename XT, bool F32_OUT, unsigned R>
__device__ __forceinline__ void gemv_few(float (*part)[kGemvBlock + 1], void *y,
                                         const XT *__restrict__ x, const bf16 *__restrict__ w,
                                         unsigned m, unsigned n, unsigned k) {
  constexpr unsigned U = R == 1 ? 8u : 4u; /* weight loads in flight a thread */
  const unsigned g = threadIdx.x / GV_LANES, lane = threadIdx.x % GV_LANES;
  const unsigned f = blockIdx.x * GV_FEAT + g;
  constexpr unsigned step = GV_LANES * 8u;
  float acc[R];
#pragma unroll
  for (unsigned i = 0; i < R; i++) acc[i] = 0.0f;
  if (f < n) {
    const bf16 *wr = w + (size_t)f * k; /* [K] */
    unsigned kk = lane * 8u;
    for (; kk + (U - 1) * step < k; kk += U * step) {
      uint4 wv[U];
#pragma unroll
      for (unsigned u = 0; u < U; u++) wv[u] = load_stream16(wr + kk + u * step);
#pragma unroll
      for (unsigned u = 0; u < U; u++) {
        float wf[8];
        unpack8(wv[u], wf);
#pragma unroll
        for (unsigned i = 0; i < R; i++) {
          if (R == 1 || i < m) {
            float xf[8];
            x8(x + (size_t)i * k + kk + u * step, xf);
#pragma unroll
            for (unsigned e = 0; e < 8; e++) acc[i] = fmaf(wf[e], xf[e], acc[i]);
          }
        }
      }
    }
    for (; kk < k; kk += step) {
      float wf[8];
      unpack8(load_stream16(wr + kk), wf);
#pragma unroll
      for (unsigned i = 0; i < R; i++) {
        if (R == 1 || i < m) {
          float xf[8];
          x8(x + (size_t)i * k + kk, xf);
#pragma unroll
          for (unsigned e = 0; e < 8; e++) acc[i] = fmaf(wf[e], xf[e], acc[i]);
        }
      }
    }
  }
#pragma unroll
  for (unsigned i = 0; i < R; i++) part[i][threadIdx.x] = acc[i];
  __syncthreads();
  if (threadIdx.x < GV_FEAT * R) {
    const unsigned fg = threadIdx.x / R, i = threadIdx.x % R;
    const unsigned ff = blockIdx.x * GV_FEAT + fg;
    if (i < m && ff < n) {
      float sum = 0.0f;
      for (unsigned l = 0; l < GV_LANES; l++) sum += part[i][fg * GV_LANES + l];
      store_out<F32_OUT>(y, (size_t)i * n + ff, sum);
    }
  }
}

/* Early start (kernels.def METRALE_KERNEL_EARLY_START): the block's weight rows go to L2
 * while the kernel before runs (at decode batch 1 the fused decode kernel leaves most of
 * the GPU idle), then the block waits for that kernel.  Nothing but the prefetches comes
 * before the wait; weights are never written by the layer's kernels anyway.  That pays only
 * where the kernel before lets this one start early (mk_allow_next: the decode kernels, the
 * gemvs, the layer's norms); otherwise the prefetches go out just ahead of the loads, for
 * nothing.  A grid's rows past the first (moe_router_topk_rows' tokens) read the same weight
 * rows, so only the first asks for them: each of 16 tokens asking for all 2 MiB cost the
 * layer's decode 16 ~1 us on the H200 (docs/perf-decode.md section 29). */
__device__ __forceinline__ void gemv_prologue(const bf16 *__restrict__ w, unsigned n, unsigned k) {
  mk_allow_next();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIPCC__)
  const unsigned f0 = blockIdx.x * GV_FEAT;
  if (f0 < n && blockIdx.y == 0) {
    const unsigned rows = n - f0 < GV_FEAT ? n - f0 : GV_FEAT;
    const char *base = reinterpret_cast<const char *>(w + (size_t)f0 * k);
    const size_t bytes = (size_t)rows * k * sizeof(bf16);
    for (size_t off = (size_t)threadIdx.x * 128u; off < bytes; off += (size_t)kGemvBlock * 128u)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(base + off));
  }
#else
  (void)w, (void)n, (void)k;
#endif
  mk_wait_prior();
}

template <typename XT, bool F32_OUT>
__device__ __forceinline__ void gemv_rows(void *y, const XT *__restrict__ x,
                                          const bf16 *__restrict__ w, unsigned m, unsigned n,
                                          unsigned k) {
  __shared__ float part[GV_ROWS][kGemvBlock + 1]; /* +1: the final sums read down columns */
  gemv_prologue(w, n, k);
  if (k % 8u == 0 && aligned16(x) && aligned16(w)) {
    /* groups of at most 4 rows: more rows per pass would need more registers and cost
     * the one-row case (the common decode) its occupancy; a second pass over the weights
     * for rows 5..16 mostly hits L2 */
    for (unsigned m0 = 0; m0 < m; m0 += 4) {
      const unsigned mc = m - m0 < 4 ? m - m0 : 4;
      const XT *xg = x + (size_t)m0 * k;
      void *yg = F32_OUT ? (void *)((float *)y + (size_t)m0 * n) : (void *)((bf16 *)y + (size_t)m0 * n);
      if (mc == 1) gemv_few<XT, F32_OUT, 1>(part, yg, xg, w, mc, n, k);
      else if (mc == 2) gemv_few<XT, F32_OUT, 2>(part, yg, xg, w, mc, n, k);
      else gemv_few<XT, F32_OUT, 4>(part, yg, xg, w, mc, n, k);
      __syncthreads(); /* part is rewritten by the next group */
    }
    return;
  }
  const unsigned g = threadIdx.x / GV_LANES, lane = threadIdx.x % GV_LANES;
  const unsigned f = blockIdx.x * GV_FEAT + g; /* this group's output feature */
  const bool vec = k % 8u == 0 && aligned16(x) && aligned16(w);
  for (unsigned m0 = 0; m0 < m; m0 += GV_ROWS) {
    const unsigned mc = m - m0 < GV_ROWS ? m - m0 : GV_ROWS;
    float acc[GV_ROWS];
#pragma unroll
    for (unsigned i = 0; i < GV_ROWS; i++) acc[i] = 0.0f;
    if (f < n) {
      const bf16 *wr = w + (size_t)f * k; /* [K] */
      const XT *xb = x + (size_t)m0 * k;  /* [mc, K] */
      if (vec) {
        /* at full occupancy one 16-byte weight load per thread in flight covers the
         * memory latency; unrolling further made ptxas spill */
        for (unsigned kk = lane * 8u; kk < k; kk += GV_LANES * 8u) {
          float wf[8];
          unpack8(*reinterpret_cast<const uint4 *>(wr + kk), wf);
#pragma unroll
          for (unsigned i = 0; i < GV_ROWS; i++) {
            if (i < mc) {
              float xf[8];
              x8(xb + (size_t)i * k + kk, xf);
#pragma unroll
              for (unsigned e = 0; e < 8; e++) acc[i] = fmaf(wf[e], xf[e], acc[i]);
            }
          }
        }
      } else {
        for (unsigned kk = lane; kk < k; kk += GV_LANES) {
          const float wv = bf16_to_f32(wr[kk]);
#pragma unroll
          for (unsigned i = 0; i < GV_ROWS; i++)
            if (i < mc) acc[i] = fmaf(wv, x1(xb + (size_t)i * k + kk), acc[i]);
        }
      }
    }
#pragma unroll
    for (unsigned i = 0; i < GV_ROWS; i++) part[i][threadIdx.x] = acc[i];
    __syncthreads();
    if (threadIdx.x < GV_FEAT * GV_ROWS) {
      const unsigned fg = threadIdx.x / GV_ROWS, i = threadIdx.x % GV_ROWS;
      const unsigned ff = blockIdx.x * GV_FEAT + fg;
      if (i < mc && ff < n) {
        float s = 0.0f;
        for (unsigned l = 0; l < GV_LANES; l++) s += part[i][fg * GV_LANES + l];
        store_out<F32_OUT>(y, (size_t)(m0 + i) * n + ff, s);
      }
    }
    __syncthreads(); /* part is rewritten by the next pass */
  }
}
}  // namespace

#endif
