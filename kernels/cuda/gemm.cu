/* gemm module: y = x . w^T with w bf16 [N,K] (HF Linear layout) and x bf16 or f32 [M,K].
 *
 * gemm_bf16 / gemm_bf16_f32 / gemm_f32in: one 64x64 output tile per block of 256
 * threads, K walked in steps of 32 through shared memory, the next step's global loads
 * issued before the current step's arithmetic.  On NVIDIA sm_80+ the tile is multiplied
 * on the tensor cores with wmma: bf16 x as bf16 (fp32 accumulate); f32 x as two tf32
 * parts, x = hi + lo, each multiplied with w (bf16 values are exact in tf32), which keeps
 * the products as accurate as fp32.  Elsewhere (HIP, older targets) a portable fp32
 * register-blocked path does it.  Every path accumulates in fp32 and rounds once.
 *
 * gemv_*: decode (M <= 16) is bound by streaming the weights, so every weight row is
 * read exactly once per 16 activation rows, with 16-byte loads. */
#include "common.cuh"

/* MK_GEMM_PORTABLE forces the portable path (to build and test it on NVIDIA). */
#if !defined(MK_GEMM_PORTABLE) && !defined(__HIPCC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MK_GEMM_WMMA 1
#include <cuda_bf16.h>
#include <mma.h>
#else
#define MK_GEMM_WMMA 0
#endif

namespace {
constexpr unsigned kBlock = mk_block("gemm_bf16");
static_assert(kBlock == 256 && mk_block("gemm_bf16_f32") == 256 && mk_block("gemm_f32in") == 256,
              "the tile mapping below assumes 256 threads");
constexpr unsigned TM = 64, TN = 64, TK = 32; /* output tile and K step */

/* ---- loads: 8 consecutive k of one row, zero outside the matrix ------------------ */

/* bf16 [rows, K].  vec: K % 8 == 0 and the base is 16-byte aligned, so a chunk starting
 * inside the row is a whole aligned vector. */
__device__ __forceinline__ uint4 load_chunk(const bf16 *__restrict__ base, unsigned rows,
                                            unsigned K, unsigned row, unsigned k, bool vec) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (row >= rows || k >= K) return v;
  const bf16 *p = base + (size_t)row * K + k;
  if (vec) return *reinterpret_cast<const uint4 *>(p);
  uint32_t e[8];
#pragma unroll
  for (unsigned i = 0; i < 8; i++) e[i] = k + i < K ? p[i] : 0u;
  v.x = e[0] | e[1] << 16;
  v.y = e[2] | e[3] << 16;
  v.z = e[4] | e[5] << 16;
  v.w = e[6] | e[7] << 16;
  return v;
}

__device__ __forceinline__ void load8(const bf16 *__restrict__ base, unsigned rows, unsigned K,
                                      unsigned row, unsigned k, bool vec, float f[8]) {
  unpack8(load_chunk(base, rows, K, row, k, vec), f);
}

/* f32 [rows, K].  vec: K % 4 == 0 and the base is 16-byte aligned. */
__device__ __forceinline__ void load8(const float *__restrict__ base, unsigned rows, unsigned K,
                                      unsigned row, unsigned k, bool vec, float f[8]) {
#pragma unroll
  for (unsigned i = 0; i < 8; i++) f[i] = 0.0f;
  if (row >= rows || k >= K) return;
  const float *p = base + (size_t)row * K + k;
  if (vec && k + 8 <= K) {
    const float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
    f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
    f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
    return;
  }
#pragma unroll
  for (unsigned i = 0; i < 8; i++) f[i] = k + i < K ? p[i] : 0.0f;
}

__device__ __forceinline__ bool vec_ok(const bf16 *x, unsigned K) { return K % 8u == 0 && aligned16(x); }
__device__ __forceinline__ bool vec_ok(const float *x, unsigned K) { return K % 4u == 0 && aligned16(x); }

template <bool F32_OUT>
__device__ __forceinline__ void store_out(void *y, size_t i, float v) {
  if (F32_OUT)
    static_cast<float *>(y)[i] = v;
  else
    static_cast<bf16 *>(y)[i] = f32_to_bf16(v);
}

/* Writes the staged fp32 tile c [TM][ldc] to y, clipped to M x N. */
template <bool F32_OUT>
__device__ __forceinline__ void write_tile(void *y, const float *c, unsigned ldc, unsigned M,
                                           unsigned N, unsigned m0, unsigned n0) {
  for (unsigned i = threadIdx.x; i < TM * TN; i += kBlock) {
    const unsigned r = i / TN, col = i % TN;
    if (m0 + r < M && n0 + col < N) store_out<F32_OUT>(y, (size_t)(m0 + r) * N + n0 + col, c[r * ldc + col]);
  }
}

#if MK_GEMM_WMMA
namespace wmma = nvcuda::wmma;
constexpr unsigned LDK = TK + 8; /* bf16 row pitch: 80 bytes keeps wmma's 32-byte alignment */
constexpr unsigned LDF = TK + 4; /* f32 row pitch: 144 bytes, likewise */
constexpr unsigned LDC = TN + 4; /* fp32 pitch of the staged result tile */

/* 8 warps of 32 (wmma is NVIDIA-only, where warps are 32 wide): warp (wr, wc) owns rows
 * wr*16..+15 and columns wc*32..+31 of the tile. */
__device__ __forceinline__ unsigned warp_row() { return (threadIdx.x / 32u) & 3u; }
__device__ __forceinline__ unsigned warp_col() { return (threadIdx.x / 32u) >> 2; }

union gemm_bf16_smem {
  struct {
    bf16 a[TM][LDK]; /* x tile, [m][k] */
    bf16 b[TN][LDK]; /* w tile, [n][k] = B column-major */
  } in;
  float c[TM][LDC];
};

template <bool F32_OUT>
__device__ __forceinline__ void gemm_tile_wmma(void *y, const bf16 *__restrict__ x,
                                               const bf16 *__restrict__ w, unsigned M,
                                               unsigned N, unsigned K) {
  __shared__ __align__(128) gemm_bf16_smem sm;
  const unsigned tid = threadIdx.x;
  const unsigned n0 = blockIdx.x * TN, m0 = blockIdx.y * TM;
  const unsigned lrow = tid >> 2, lk = (tid & 3u) * 8u; /* this thread's chunk of a tile */
  const bool vx = vec_ok(x, K), vw = vec_ok(w, K);
  const unsigned wr = warp_row(), wc = warp_col();

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
  wmma::fill_fragment(acc[0], 0.0f);
  wmma::fill_fragment(acc[1], 0.0f);

  uint4 ra = load_chunk(x, M, K, m0 + lrow, lk, vx);
  uint4 rb = load_chunk(w, N, K, n0 + lrow, lk, vw);
  for (unsigned k0 = 0; k0 < K; k0 += TK) {
    *reinterpret_cast<uint4 *>(&sm.in.a[lrow][lk]) = ra;
    *reinterpret_cast<uint4 *>(&sm.in.b[lrow][lk]) = rb;
    __syncthreads();
    if (k0 + TK < K) {
      ra = load_chunk(x, M, K, m0 + lrow, k0 + TK + lk, vx);
      rb = load_chunk(w, N, K, n0 + lrow, k0 + TK + lk, vw);
    }
#pragma unroll
    for (unsigned kk = 0; kk < TK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, reinterpret_cast<const __nv_bfloat16 *>(&sm.in.a[wr * 16][kk]), LDK);
#pragma unroll
      for (unsigned j = 0; j < 2; j++) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
        wmma::load_matrix_sync(
            fb, reinterpret_cast<const __nv_bfloat16 *>(&sm.in.b[wc * 32 + j * 16][kk]), LDK);
        wmma::mma_sync(acc[j], fa, fb, acc[j]);
      }
    }
    __syncthreads();
  }
  wmma::store_matrix_sync(&sm.c[wr * 16][wc * 32], acc[0], LDC, wmma::mem_row_major);
  wmma::store_matrix_sync(&sm.c[wr * 16][wc * 32 + 16], acc[1], LDC, wmma::mem_row_major);
  __syncthreads();
  write_tile<F32_OUT>(y, &sm.c[0][0], LDC, M, N, m0, n0);
}

union gemm_f32_smem {
  struct {
    float a[TM][LDF]; /* x tile, [m][k] */
    float b[TN][LDF]; /* w tile converted to f32, [n][k] */
  } in;
  float c[TM][LDC];
};

/* f32 x: tf32 tensor cores on x = hi + lo (both tf32); w is exact in tf32. */
__device__ __forceinline__ void gemm_tile_tf32(float *y, const float *__restrict__ x,
                                               const bf16 *__restrict__ w, unsigned M,
                                               unsigned N, unsigned K) {
  __shared__ __align__(128) gemm_f32_smem sm;
  const unsigned tid = threadIdx.x;
  const unsigned n0 = blockIdx.x * TN, m0 = blockIdx.y * TM;
  const unsigned lrow = tid >> 2, lk = (tid & 3u) * 8u;
  const bool vx = vec_ok(x, K), vw = vec_ok(w, K);
  const unsigned wr = warp_row(), wc = warp_col();

  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2];
  wmma::fill_fragment(acc[0], 0.0f);
  wmma::fill_fragment(acc[1], 0.0f);

  float ra[8], rb[8];
  load8(x, M, K, m0 + lrow, lk, vx, ra);
  load8(w, N, K, n0 + lrow, lk, vw, rb);
  for (unsigned k0 = 0; k0 < K; k0 += TK) {
    *reinterpret_cast<float4 *>(&sm.in.a[lrow][lk]) = make_float4(ra[0], ra[1], ra[2], ra[3]);
    *reinterpret_cast<float4 *>(&sm.in.a[lrow][lk + 4]) = make_float4(ra[4], ra[5], ra[6], ra[7]);
    *reinterpret_cast<float4 *>(&sm.in.b[lrow][lk]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
    *reinterpret_cast<float4 *>(&sm.in.b[lrow][lk + 4]) = make_float4(rb[4], rb[5], rb[6], rb[7]);
    __syncthreads();
    if (k0 + TK < K) {
      load8(x, M, K, m0 + lrow, k0 + TK + lk, vx, ra);
      load8(w, N, K, n0 + lrow, k0 + TK + lk, vw, rb);
    }
#pragma unroll
    for (unsigned kk = 0; kk < TK; kk += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> hi, lo;
      wmma::load_matrix_sync(hi, &sm.in.a[wr * 16][kk], LDF);
#pragma unroll
      for (int t = 0; t < hi.num_elements; t++) {
        const float v = hi.x[t];
        hi.x[t] = wmma::__float_to_tf32(v);
        lo.x[t] = wmma::__float_to_tf32(v - hi.x[t]);
      }
#pragma unroll
      for (unsigned j = 0; j < 2; j++) {
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
        wmma::load_matrix_sync(fb, &sm.in.b[wc * 32 + j * 16][kk], LDF);
#pragma unroll
        for (int t = 0; t < fb.num_elements; t++) fb.x[t] = wmma::__float_to_tf32(fb.x[t]);
        wmma::mma_sync(acc[j], lo, fb, acc[j]); /* the small part first */
        wmma::mma_sync(acc[j], hi, fb, acc[j]);
      }
    }
    __syncthreads();
  }
  wmma::store_matrix_sync(&sm.c[wr * 16][wc * 32], acc[0], LDC, wmma::mem_row_major);
  wmma::store_matrix_sync(&sm.c[wr * 16][wc * 32 + 16], acc[1], LDC, wmma::mem_row_major);
  __syncthreads();
  write_tile<true>(y, &sm.c[0][0], LDC, M, N, m0, n0);
}
#endif

/* Portable path: tiles converted to fp32 and stored k-major, so that each thread's 4x4
 * register block reads 4 consecutive m and 4 consecutive n as one vector. */
template <typename XT, bool F32_OUT>
__device__ __forceinline__ void gemm_tile_portable(void *y, const XT *__restrict__ x,
                                                   const bf16 *__restrict__ w, unsigned M,
                                                   unsigned N, unsigned K) {
  __shared__ __align__(16) float as[TK][TM + 4];
  __shared__ __align__(16) float bs[TK][TN + 4];
  const unsigned tid = threadIdx.x;
  const unsigned n0 = blockIdx.x * TN, m0 = blockIdx.y * TM;
  const unsigned lrow = tid >> 2, lk = (tid & 3u) * 8u;
  const unsigned tx = tid % 16u, ty = tid / 16u; /* rows ty*4..+3, columns tx*4..+3 */
  const bool vx = vec_ok(x, K), vw = vec_ok(w, K);
  float acc[4][4] = {};

  float ra[8], rb[8];
  load8(x, M, K, m0 + lrow, lk, vx, ra);
  load8(w, N, K, n0 + lrow, lk, vw, rb);
  for (unsigned k0 = 0; k0 < K; k0 += TK) {
#pragma unroll
    for (unsigned e = 0; e < 8; e++) {
      as[lk + e][lrow] = ra[e];
      bs[lk + e][lrow] = rb[e];
    }
    __syncthreads();
    if (k0 + TK < K) {
      load8(x, M, K, m0 + lrow, k0 + TK + lk, vx, ra);
      load8(w, N, K, n0 + lrow, k0 + TK + lk, vw, rb);
    }
#pragma unroll 8
    for (unsigned kk = 0; kk < TK; kk++) {
      const float4 av = *reinterpret_cast<const float4 *>(&as[kk][ty * 4]);
      const float4 bv = *reinterpret_cast<const float4 *>(&bs[kk][tx * 4]);
      const float a4[4] = {av.x, av.y, av.z, av.w}, b4[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
      for (unsigned i = 0; i < 4; i++)
#pragma unroll
        for (unsigned j = 0; j < 4; j++) acc[i][j] = fmaf(a4[i], b4[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (unsigned i = 0; i < 4; i++)
#pragma unroll
    for (unsigned j = 0; j < 4; j++) {
      const unsigned m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
      if (m < M && n < N) store_out<F32_OUT>(y, (size_t)m * N + n, acc[i][j]);
    }
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

template <typename XT, bool F32_OUT>
__device__ __forceinline__ void gemv_rows(void *y, const XT *__restrict__ x,
                                          const bf16 *__restrict__ w, unsigned m, unsigned n,
                                          unsigned k) {
  __shared__ float part[GV_ROWS][kGemvBlock + 1]; /* +1: the final sums read down columns */
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

MK_KERNEL(gemm_bf16)(bf16 *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {
#if MK_GEMM_WMMA
  gemm_tile_wmma<false>(y, x, w, m, n, k);
#else
  gemm_tile_portable<bf16, false>(y, x, w, m, n, k);
#endif
}
MK_CHECK(gemm_bf16, gemm);

MK_KERNEL(gemm_bf16_f32)(float *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n,
                         unsigned k) {
#if MK_GEMM_WMMA
  gemm_tile_wmma<true>(y, x, w, m, n, k);
#else
  gemm_tile_portable<bf16, true>(y, x, w, m, n, k);
#endif
}
MK_CHECK(gemm_bf16_f32, gemm);

MK_KERNEL(gemm_f32in)(float *y, const float *x, const bf16 *w, unsigned m, unsigned n,
                      unsigned k) {
#if MK_GEMM_WMMA
  gemm_tile_tf32(y, x, w, m, n, k);
#else
  gemm_tile_portable<float, true>(y, x, w, m, n, k);
#endif
}
MK_CHECK(gemm_f32in, gemm);

MK_KERNEL(gemv_bf16)(bf16 *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {
  gemv_rows<bf16, false>(y, x, w, m, n, k);
}
MK_CHECK(gemv_bf16, gemm);

MK_KERNEL(gemv_bf16_f32)(float *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n,
                         unsigned k) {
  gemv_rows<bf16, true>(y, x, w, m, n, k);
}
MK_CHECK(gemv_bf16_f32, gemm);

MK_KERNEL(gemv_f32in)(float *y, const float *x, const bf16 *w, unsigned m, unsigned n,
                      unsigned k) {
  gemv_rows<float, true>(y, x, w, m, n, k);
}
MK_CHECK(gemv_f32in, gemm);
