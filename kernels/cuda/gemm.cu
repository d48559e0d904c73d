/* gemm module: y = x . w^T with w bf16 [N,K] (HF Linear layout) and x bf16 or f32 [M,K].
 *
 * gemm_*: on NVIDIA sm_80+ (sm_90 included) a tile of 256 threads = 8 warps of
 * mma.sync m16n8k16 (bf16 in, fp32 accumulate), K walked in steps of 32 through a ring
 * of cp.async stages in XOR-swizzled shared memory (ldmatrix reads without bank
 * conflicts).  The manifest kernels (grid (ceil(N/64), ceil(M/64))) compute 64x64 tiles;
 * the *_t128 kernels 128x128 tiles, which halve the operand traffic per FLOP and let
 * the tensor cores, not shared memory or L2, set the pace on large M; in the sm_90a image
 * these run on wgmma (two warpgroups, m64n128k16) fed by the same stages; the *_ws kernels
 * (sm_90a only, gemm_ws.cuh) compute 128x256 tiles with a producer warpgroup feeding two
 * consumer warpgroups through mbarriers by TMA copies, and serve every large GEMM there.  Blocks walk the
 * tiles in groups of 8 tile rows, so that a wave of blocks shares the w columns in L2.
 * Every kernel needs at most 48 KiB of static shared memory (the layer launches with no
 * dynamic shared memory).
 *
 * f32 x (gemm_f32in*): x is split while it is read from shared memory into two bf16
 * parts, x = hi + lo with |x - hi - lo| <= 2^-17 |x|, and both are multiplied with w
 * (bf16, exact): two bf16 MMAs, more accurate than tf32 and half the cost of the two
 * tf32 ones a 16-bit-exact product needs.  Every path accumulates in fp32 and rounds
 * once.  Elsewhere (HIP, MK_GEMM_PORTABLE) a portable fp32 register-blocked path does
 * the manifest kernels; the _t128 kernels exist only on the tensor-core path.
 *
 * gemv_*: decode (M <= 16) is bound by streaming the weights, so every weight row is
 * read exactly once per 16 activation rows, with 16-byte loads. */
#include "common.cuh"
#include "gemv.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIPCC__)
#include <cooperative_groups.h> /* clusters and distributed shared memory (split K) */
#endif

/* MK_GEMM_PORTABLE forces the portable path (to build and test it on NVIDIA). */
#if !defined(MK_GEMM_PORTABLE) && !defined(__HIPCC__) && !defined(__HIP_PLATFORM_AMD__) && \
    defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MK_GEMM_MMA 1
#else
#define MK_GEMM_MMA 0
#endif

#if MK_GEMM_MMA && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "tma_templates.h"
extern "C" {
/* The tensor-map templates the CUDA backend writes when it loads this module
 * (tma_templates.h), and the 128x256 tiles' maps an SM (gemm_ws.cuh: x and w, and the three
 * outputs of gemm_f16_ws_cols3). */
__device__ __align__(128) unsigned char metrale_tma_templates[METRALE_TMA_COUNT][METRALE_TMA_BYTES];
__device__ __align__(128) unsigned char metrale_gemm_ws_maps[1024][5][METRALE_TMA_BYTES];
}
#endif

namespace {
constexpr unsigned kBlock = mk_block("gemm_bf16");
static_assert(kBlock == 256 && mk_block("gemm_bf16_f32") == 256 && mk_block("gemm_f32in") == 256,
              "the tile mapping below assumes 256 threads");
constexpr unsigned TM = 64, TN = 64; /* the manifest kernels' output tile */

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

__device__ __forceinline__ bool vec_ok(const bf16 *x, unsigned K) { return K % 8u == 0 && aligned16(x); }
__device__ __forceinline__ bool vec_ok(const float *x, unsigned K) { return K % 4u == 0 && aligned16(x); }


#if MK_GEMM_MMA
/* ---- tensor cores: mma.sync m16n8k16 bf16 ------------------------------------------ */
}  // namespace
#include "sm80.cuh"
namespace {
namespace tc {
constexpr unsigned BK = 32;     /* k per pipeline stage */
constexpr unsigned GROUP_M = 8; /* tile rows a wave of blocks walks together */

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
/* The launch's dynamic shared memory (kernels.def METRALE_KERNEL_SHARED), its base
 * rounded up to 1024 bytes for the swizzled tiles: the rows ask for 1 KiB more. */
extern __shared__ __align__(16) unsigned char gemm_dyn_smem[];
__device__ __forceinline__ uint32_t dyn_smem_base() {
  return (smem_addr(gemm_dyn_smem) + 1023u) & ~1023u;
}

/* 16 bytes global -> shared without registers (sm80.cuh) */
using sm80::cp_async16;
using sm80::cp_commit;
using sm80::cp_wait;
using sm80::st_shared16;
using sm80::ldsm_x4;
__device__ __forceinline__ float2 lds_f2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}
using sm80::mma16816;
/* two floats as bf16x2, round to nearest even; e0 in the low half (the lower k) */
__device__ __forceinline__ uint32_t pack_bf16(float e0, float e1) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(e1), "f"(e0));
  return r;
}
/* v = hi + lo, both bf16x2: lo is the rounding error of hi, itself rounded */
__device__ __forceinline__ void split_bf16(float2 v, uint32_t &hi, uint32_t &lo) {
  hi = pack_bf16(v.x, v.y);
  lo = pack_bf16(v.x - __uint_as_float(hi << 16), v.y - __uint_as_float(hi & 0xffff0000u));
}

/* Shared tiles are [rows][BK] with the 16-byte chunks of each row XOR-permuted, so that
 * the 8 rows one ldmatrix (or one quarter-warp of 8-byte loads) touches fall in
 * different banks.  bf16: 64-byte rows, 4 chunks; f32: 128-byte rows, 8 chunks. */
template <typename T> struct tile_of;
template <> struct tile_of<bf16> {
  static constexpr unsigned ROW_BYTES = 64, CHUNKS = 4, PER_CHUNK = 8;
  static __device__ __forceinline__ uint32_t off(unsigned r, unsigned c) { return sm80::swz64(r, c); }
};
/* f32: the A fragment is read as 8-byte pairs, 4 rows x 32 bytes per half-warp; the
 * permutation of rows 0-3 (and of 4-7) spreads those over all 8 chunks. */
template <> struct tile_of<float> {
  static constexpr unsigned ROW_BYTES = 128, CHUNKS = 8, PER_CHUNK = 4;
  static __device__ __forceinline__ uint32_t off(unsigned r, unsigned c) {
    return r * 128u + ((c ^ (((r & 3u) << 1) | ((r >> 2) & 1u))) << 4);
  }
};

/* The f32 A fragment of one k16 step as mma.m16n8k16 and wgmma (A in registers) take it:
 * rows ra and ra + 8, k c, c + 1 and c + 8, c + 9 (c = k0 + 2 (lane % 4)), read as f32 pairs
 * from a tile of layout L at sa and split into hi and lo bf16 (x = hi + lo), or (!LO) only
 * rounded to bf16. */
template <typename L, bool LO = true>
__device__ __forceinline__ void split_frag(uint32_t sa, unsigned ra, unsigned c, uint32_t (&hi)[4],
                                           uint32_t (&lo)[4]) {
  const unsigned rb = ra + 8;
  const float2 v[4] = {lds_f2(sa + L::off(ra, c >> 2) + (c & 3u) * 4u), lds_f2(sa + L::off(rb, c >> 2) + (c & 3u) * 4u),
                       lds_f2(sa + L::off(ra, (c + 8) >> 2) + (c & 3u) * 4u),
                       lds_f2(sa + L::off(rb, (c + 8) >> 2) + (c & 3u) * 4u)};
#pragma unroll
  for (unsigned i = 0; i < 4; i++) {
    if constexpr (LO)
      split_bf16(v[i], hi[i], lo[i]);
    else
      hi[i] = pack_bf16(v[i].x, v[i].y);
  }
}

/* one 16-byte chunk read element by element, zero outside the matrix (unaligned rows) */
__device__ __forceinline__ uint4 chunk_scalar(const bf16 *base, unsigned rows, unsigned K,
                                              unsigned row, unsigned k) {
  return load_chunk(base, rows, K, row, k, false);
}
__device__ __forceinline__ uint4 chunk_scalar(const float *base, unsigned rows, unsigned K,
                                              unsigned row, unsigned k) {
  uint32_t e[4] = {0u, 0u, 0u, 0u};
  if (row < rows) {
    const float *p = base + (size_t)row * K;
#pragma unroll
    for (unsigned i = 0; i < 4; i++)
      if (k + i < K) e[i] = __float_as_uint(p[k + i]);
  }
  return make_uint4(e[0], e[1], e[2], e[3]);
}

/* Stages rows row0..row0+ROWS-1, k0..k0+BK-1 of base [rows, K] into the tile at s, the
 * NTHR threads tid = 0..NTHR-1 sharing the chunks.  vec: whole aligned chunks through
 * cp.async; else element loads and a shared store. */
template <unsigned ROWS, typename T, unsigned NTHR = kBlock, typename L = tile_of<T>>
__device__ __forceinline__ void load_tile(uint32_t s, const T *__restrict__ base, unsigned rows,
                                          unsigned K, unsigned row0, unsigned k0, bool vec,
                                          unsigned tid = threadIdx.x) {
  constexpr unsigned N_CHUNKS = ROWS * L::CHUNKS;
  static_assert(N_CHUNKS % NTHR == 0, "whole chunks per thread");
#pragma unroll
  for (unsigned i = 0; i < N_CHUNKS / NTHR; i++) {
    const unsigned idx = tid + i * NTHR;
    const unsigned r = idx / L::CHUNKS, c = idx % L::CHUNKS;
    const unsigned row = row0 + r, k = k0 + c * L::PER_CHUNK;
    const uint32_t dst = s + L::off(r, c);
    if (vec) {
      const bool in = row < rows && k < K;
      cp_async16(dst, in ? base + (size_t)row * K + k : base, in ? 16u : 0u);
    } else {
      st_shared16(dst, chunk_scalar(base, rows, K, row, k));
    }
  }
}

/* One ring stage at `at`: the x tile (rows m0.., BM of them, layout LX) then the w tile
 * (rows n0.., BN), both of k step kstep. */
template <unsigned BM, unsigned BN, typename XT, unsigned NTHR = kBlock, typename LX = tile_of<XT>>
__device__ __forceinline__ void load_stage(uint32_t at, const XT *__restrict__ x,
                                           const bf16 *__restrict__ w, unsigned M, unsigned N,
                                           unsigned K, unsigned m0, unsigned n0, unsigned kstep,
                                           bool vx, bool vw, unsigned tid = threadIdx.x) {
  load_tile<BM, XT, NTHR, LX>(at, x, M, K, m0, kstep * BK, vx, tid);
  load_tile<BN, bf16, NTHR>(at + BM * LX::ROW_BYTES, w, N, K, n0, kstep * BK, vw, tid);
}

/* This block's k steps [first, first + count) of KT: slice blockIdx.z of SPLIT when K is
 * split (a cluster's blocks share a tile), else all of them. */
template <unsigned SPLIT>
__device__ __forceinline__ void k_steps_of_block(unsigned KT, unsigned &first, unsigned &count) {
  first = SPLIT > 1 ? (unsigned)((uint64_t)KT * blockIdx.z / SPLIT) : 0u;
  count = SPLIT > 1 ? (unsigned)((uint64_t)KT * (blockIdx.z + 1) / SPLIT) - first : KT;
}

/* Tile id of a gx x gy tile grid -> its output tile, column-major within groups of G (GROUP_M)
 * tile rows: a bijection of the tile grid, whatever its size. */
template <unsigned G = GROUP_M>
__device__ __forceinline__ void tile_of_index(unsigned id, unsigned gx, unsigned gy, unsigned &tm, unsigned &tn) {
  const unsigned group = G * gx, first = id / group * G;
  const unsigned rows = gy - first < G ? gy - first : G;
  tm = first + id % group % rows;
  tn = id % group / rows;
}

/* Block b of the grid -> its output tile (the launch grid is the tile grid). */
__device__ __forceinline__ void tile_of_block(unsigned &tm, unsigned &tn) {
  tile_of_index(blockIdx.y * gridDim.x + blockIdx.x, gridDim.x, gridDim.y, tm, tn);
}

/* Two adjacent outputs (row, col), (row, col + 1). pair: N even and y aligned for it. */
template <bool F32_OUT>
__device__ __forceinline__ void store2(void *y, unsigned N, unsigned row, unsigned col, float v0,
                                       float v1, bool pair) {
  const size_t i = (size_t)row * N + col;
  if (pair && col + 1 < N) {
    if (F32_OUT)
      *reinterpret_cast<float2 *>(static_cast<float *>(y) + i) = make_float2(v0, v1);
    else
      *reinterpret_cast<uint32_t *>(static_cast<bf16 *>(y) + i) = bf16x2_rn(v0, v1);
    return;
  }
  if (col < N) store_out<F32_OUT>(y, i, v0);
  if (col + 1 < N) store_out<F32_OUT>(y, i + 1, v1);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* Split K (SPLIT > 1, sm_90 only): the SPLIT blocks of a thread-block cluster (1, 1, SPLIT)
 * share one output tile, block z walking the k steps [KT*z/SPLIT, KT*(z+1)/SPLIT).  Each
 * leaves its f32 partial tile in its own shared memory; after a cluster barrier, block r
 * adds rows [r*BM/SPLIT, (r+1)*BM/SPLIT) of all SPLIT partials, always in rank order 0, 1,
 * ..., through distributed shared memory, so the result does not depend on timing.  A
 * second cluster barrier keeps every partial alive until all blocks have read it. */
__host__ __device__ constexpr unsigned split_ld(unsigned BN) { return BN + 4; } /* +4: 8-byte stores spread over banks */

/* The sum and store once every block of the cluster has left its partial tile [BM, BN]
 * (row stride split_ld(BN)) in `part`, by kBlock threads (tid 0..kBlock-1) a block; any
 * others must have exited. */
template <unsigned BM, unsigned BN, unsigned SPLIT, bool F32_OUT>
__device__ __forceinline__ void split_sum(void *y, float *part, unsigned M, unsigned N, unsigned m0,
                                          unsigned n0, unsigned tid = threadIdx.x) {
  constexpr unsigned LD = split_ld(BN), ROWS = BM / SPLIT, VECS = ROWS * BN / 4;
  static_assert(BM % SPLIT == 0 && VECS % kBlock == 0, "whole float4s per thread");
  namespace cg = cooperative_groups;
  cg::cluster_group cl = cg::this_cluster();
  cl.sync();
  const unsigned rank = cl.block_rank();
  const bool pair = N % 2u == 0 && ((uintptr_t)y & (F32_OUT ? 7u : 3u)) == 0;
#pragma unroll
  for (unsigned v = 0; v < VECS / kBlock; v++) {
    const unsigned idx = tid + v * kBlock;
    const unsigned r = rank * ROWS + idx / (BN / 4), c = idx % (BN / 4) * 4;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (unsigned q = 0; q < SPLIT; q++) {
      const float4 p = *cl.map_shared_rank(reinterpret_cast<float4 *>(part + r * LD + c), q);
      sum.x += p.x;
      sum.y += p.y;
      sum.z += p.z;
      sum.w += p.w;
    }
    if (m0 + r < M) {
      store2<F32_OUT>(y, N, m0 + r, n0 + c, sum.x, sum.y, pair);
      store2<F32_OUT>(y, N, m0 + r, n0 + c + 2, sum.z, sum.w, pair);
    }
  }
  cl.sync();
}

/* The 64x64 (mma.sync) tile's accumulators as the partial tile, then split_sum. */
template <unsigned BM, unsigned BN, unsigned MI, unsigned NI, unsigned SPLIT, bool F32_OUT>
__device__ __forceinline__ void split_reduce(void *y, unsigned char *smem, const float (&acc)[MI][NI][4],
                                             unsigned M, unsigned N, unsigned m0, unsigned n0) {
  constexpr unsigned WTM = BM / 4, WTN = BN / 2, LD = split_ld(BN);
  const unsigned lane = threadIdx.x % 32u, warp = threadIdx.x / 32u, wm = warp >> 1, wn = warp & 1u;
  const unsigned g = lane >> 2, t = lane & 3u;
  float *part = reinterpret_cast<float *>(smem);
  __syncthreads(); /* the ring's last stage has been read by every warp */
#pragma unroll
  for (unsigned mi = 0; mi < MI; mi++)
#pragma unroll
    for (unsigned ni = 0; ni < NI; ni++) {
      const unsigned r = wm * WTM + mi * 16 + g, c = wn * WTN + ni * 8 + 2 * t;
      *reinterpret_cast<float2 *>(part + r * LD + c) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<float2 *>(part + (r + 8) * LD + c) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
    }
  split_sum<BM, BN, SPLIT, F32_OUT>(y, part, M, N, m0, n0);
}
#endif

/* One BM x BN output tile per block of 8 warps (4 along M x 2 along N), STAGES-deep
 * ring of (x tile, w tile) stages, in static shared memory or (DYN) the launch's.
 * SPLIT > 1: a cluster of SPLIT blocks shares the tile, each a slice of K (split_reduce). */
template <unsigned BM, unsigned BN, unsigned STAGES, typename XT, bool F32_OUT, bool DYN = false,
          unsigned SPLIT = 1>
__device__ __forceinline__ void gemm_tile(void *y, const XT *__restrict__ x,
                                          const bf16 *__restrict__ w, unsigned M, unsigned N,
                                          unsigned K) {
  constexpr unsigned WTM = BM / 4, WTN = BN / 2, MI = WTM / 16, NI = WTN / 8;
  static_assert(MI >= 1 && NI % 2 == 0, "warp tile");
  constexpr unsigned A_BYTES = BM * tile_of<XT>::ROW_BYTES, B_BYTES = BN * tile_of<bf16>::ROW_BYTES;
  constexpr unsigned STAGE = A_BYTES + B_BYTES;
  static_assert(STAGES >= 2 && (DYN || STAGES * STAGE <= 48u * 1024u), "static shared memory");
  __shared__ __align__(128) unsigned char smem[DYN ? 16u : STAGES * STAGE];

  unsigned tm, tn;
  tile_of_block(tm, tn);
  const unsigned m0 = tm * BM, n0 = tn * BN;
  if (m0 >= M || n0 >= N) return; /* whole block: before any barrier */
  const unsigned lane = threadIdx.x % 32u, warp = threadIdx.x / 32u;
  const unsigned wm = warp >> 1, wn = warp & 1u;
  const bool vx = vec_ok(x, K), vw = vec_ok(w, K);
  const unsigned KT = (K + BK - 1) / BK;
  const uint32_t s0 = DYN ? dyn_smem_base() : smem_addr(smem);
  static_assert(SPLIT == 1 || (!DYN && BM * (BN + 4) * 4 <= STAGES * STAGE), "split partials fit the ring");
  unsigned kt0, NT; /* this block's k steps [kt0, kt0 + NT) */
  k_steps_of_block<SPLIT>(KT, kt0, NT);

  float acc[MI][NI][4];
#pragma unroll
  for (unsigned i = 0; i < MI; i++)
#pragma unroll
    for (unsigned j = 0; j < NI; j++)
#pragma unroll
      for (unsigned e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

#pragma unroll
  for (unsigned s = 0; s + 1 < STAGES; s++) {
    if (s < NT) load_stage<BM, BN>(s0 + s * STAGE, x, w, M, N, K, m0, n0, kt0 + s, vx, vw);
    cp_commit();
  }

  for (unsigned kt = 0; kt < NT; kt++) {
    /* stage kt has landed (this thread's copies), and after the barrier everyone's; the
     * barrier also retires the reads of stage kt-1, whose slot is refilled next */
    cp_wait<STAGES - 2>();
    __syncthreads();
    const unsigned nk = kt + STAGES - 1;
    if (nk < NT) load_stage<BM, BN>(s0 + (nk % STAGES) * STAGE, x, w, M, N, K, m0, n0, kt0 + nk, vx, vw);
    cp_commit();

    const uint32_t sa = s0 + (kt % STAGES) * STAGE, sb = sa + A_BYTES;
#pragma unroll
    for (unsigned kk = 0; kk < BK; kk += 16) {
      uint32_t b[NI][2];
#pragma unroll
      for (unsigned nj = 0; nj < NI / 2; nj++) {
        /* matrices: n 0-7 | k 0-7, n 0-7 | k 8-15, n 8-15 | k 0-7, n 8-15 | k 8-15 */
        const unsigned n = wn * WTN + nj * 16 + (lane & 7u) + ((lane >> 4) << 3);
        uint32_t r[4];
        ldsm_x4(r, sb + tile_of<bf16>::off(n, kk / 8 + ((lane >> 3) & 1u)));
        b[2 * nj][0] = r[0];
        b[2 * nj][1] = r[1];
        b[2 * nj + 1][0] = r[2];
        b[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (unsigned mi = 0; mi < MI; mi++) {
        const unsigned r0 = wm * WTM + mi * 16;
        if constexpr (sizeof(XT) == 2) {
          /* matrices: m 0-7 | k 0-7, m 8-15 | k 0-7, m 0-7 | k 8-15, m 8-15 | k 8-15 */
          uint32_t a[4];
          ldsm_x4(a, sa + tile_of<bf16>::off(r0 + (lane & 15u), kk / 8 + (lane >> 4)));
#pragma unroll
          for (unsigned ni = 0; ni < NI; ni++) mma16816(acc[mi][ni], a, b[ni]);
        } else {
          /* the A fragment read as f32 pairs: rows g, g+8 and k 2t, 2t+8 */
          uint32_t hi[4], lo[4];
          split_frag<tile_of<float>>(sa, r0 + (lane >> 2), kk + 2 * (lane & 3u), hi, lo);
#pragma unroll
          for (unsigned ni = 0; ni < NI; ni++) {
            mma16816(acc[mi][ni], lo, b[ni]);
            mma16816(acc[mi][ni], hi, b[ni]);
          }
        }
      }
    }
  }
  cp_wait<0>(); /* nothing may be in flight at exit (only empty groups are) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (SPLIT > 1) {
    split_reduce<BM, BN, MI, NI, SPLIT, F32_OUT>(y, smem, acc, M, N, m0, n0);
    return;
  }
#endif

  const bool pair = N % 2u == 0 && ((uintptr_t)y & (F32_OUT ? 7u : 3u)) == 0;
  const unsigned g = lane >> 2, t = lane & 3u;
#pragma unroll
  for (unsigned mi = 0; mi < MI; mi++)
#pragma unroll
    for (unsigned ni = 0; ni < NI; ni++) {
      const unsigned row = m0 + wm * WTM + mi * 16 + g, col = n0 + wn * WTN + ni * 8 + 2 * t;
      if (row < M) store2<F32_OUT>(y, N, row, col, acc[mi][ni][0], acc[mi][ni][1], pair);
      if (row + 8 < M) store2<F32_OUT>(y, N, row + 8, col, acc[mi][ni][2], acc[mi][ni][3], pair);
    }
}
}  // namespace tc
#endif

#if MK_GEMM_MMA && defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* ---- sm_90a: wgmma (warpgroup MMA) for the 128x128 tiles ---------------------------- */
#define MK_GEMM_WGMMA 1
#include "sm90a.cuh"
#include "gemm_wgmma.cuh"
#include "gemm_ws.cuh"
#else
#define MK_GEMM_WGMMA 0
#endif

#if !MK_GEMM_MMA
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

/* Portable path: tiles converted to fp32 and stored k-major, so that each thread's 4x4
 * register block reads 4 consecutive m and 4 consecutive n as one vector. */
constexpr unsigned TK = 32; /* K step */

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
#endif

}  // namespace

MK_KERNEL(gemm_bf16)(bf16 *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {
#if MK_GEMM_MMA
  tc::gemm_tile<TM, TN, 6, bf16, false>(y, x, w, m, n, k);
#else
  gemm_tile_portable<bf16, false>(y, x, w, m, n, k);
#endif
}
MK_CHECK(gemm_bf16, gemm);

MK_KERNEL(gemm_bf16_f32)(float *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n,
                         unsigned k) {
#if MK_GEMM_MMA
  tc::gemm_tile<TM, TN, 6, bf16, true>(y, x, w, m, n, k);
#else
  gemm_tile_portable<bf16, true>(y, x, w, m, n, k);
#endif
}
MK_CHECK(gemm_bf16_f32, gemm);

MK_KERNEL(gemm_f32in)(float *y, const float *x, const bf16 *w, unsigned m, unsigned n,
                      unsigned k) {
#if MK_GEMM_MMA
  tc::gemm_tile<TM, TN, 4, float, true>(y, x, w, m, n, k);
#else
  gemm_tile_portable<float, true>(y, x, w, m, n, k);
#endif
}
MK_CHECK(gemm_f32in, gemm);

#if MK_GEMM_MMA
/* 128x128 tiles: 64 accumulators a thread; two blocks an SM (<= 128 registers; the
 * stages in dynamic shared memory, two blocks fit an sm_80 SM's 164 KiB). */
#define MK_KERNEL_T128(name) \
  extern "C" __global__ void __launch_bounds__(mk_block(#name), 2) name
constexpr unsigned kT128StagesBf16 = 4, kT128StagesF32 = 3;
static_assert(mk_shared("gemm_bf16_t128") == kT128StagesBf16 * 128u * (64u + 64u) + 1024u &&
                  mk_shared("gemm_f32in_t128") == kT128StagesF32 * 128u * (128u + 64u) + 1024u,
              "kernels.def METRALE_KERNEL_SHARED rows: the stages plus 1 KiB of alignment");

MK_KERNEL_T128(gemm_bf16_t128)(bf16 *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n,
                               unsigned k) {
#if MK_GEMM_WGMMA
  wg::gemm_tile_wg<kT128StagesBf16, bf16, false>(y, x, w, m, n, k);
#else
  tc::gemm_tile<128, 128, kT128StagesBf16, bf16, false, true>(y, x, w, m, n, k);
#endif
}
MK_CHECK(gemm_bf16_t128, gemm);

MK_KERNEL_T128(gemm_f32in_t128)(float *y, const float *x, const bf16 *w, unsigned m, unsigned n,
                                unsigned k) {
#if MK_GEMM_WGMMA
  wg::gemm_tile_wg<kT128StagesF32, float, true>(y, x, w, m, n, k);
#else
  tc::gemm_tile<128, 128, kT128StagesF32, float, true, true>(y, x, w, m, n, k);
#endif
}
MK_CHECK(gemm_f32in_t128, gemm);

static_assert(mk_block("gemm_bf16_t128") == kBlock && mk_block("gemm_f32in_t128") == kBlock,
              "the tile mapping assumes 256 threads");
#endif

#if MK_GEMM_WGMMA
/* 128x256 tiles, warp-specialised (gemm_ws.cuh): one block an SM, 8 stages of 24 KiB (bf16 x)
 * or 6 of 32 KiB (f32 x).  Only in the sm_90a image. */
constexpr unsigned kWsStagesBf16 = 8, kWsStagesF32 = 6;
static_assert(mk_shared("gemm_bf16_ws") == kWsStagesBf16 * ws::ring<bf16, kWsStagesBf16, 128, 256>::STAGE + 1024u &&
                  mk_shared("gemm_f32in_ws") == kWsStagesF32 * ws::ring<float, kWsStagesF32, 128, 256>::STAGE + 1024u,
              "kernels.def METRALE_KERNEL_SHARED rows: the stages plus 1 KiB of alignment");
static_assert(mk_shared("gemm_bf16_ws") > 114u * 1024u && mk_shared("gemm_f32in_ws") > 114u * 1024u,
              "one block an SM (of 228 KiB): a block's tensor maps live in its SM's slot");
static_assert(mk_block("gemm_bf16_ws") == ws::THREADS && mk_block("gemm_f32in_ws") == ws::THREADS &&
                  mk_block("gemm_f32in_hi_ws") == ws::THREADS && mk_shared("gemm_f32in_hi_ws") == mk_shared("gemm_f32in_ws"),
              "a producer warpgroup and two consumer warpgroups");
#define MK_KERNEL_WS(name) extern "C" __global__ void __launch_bounds__(mk_block(#name), 1) name
/* the 16-bit x forms: clusters of two blocks sharing w (ws::walk, PAIR; kernels.def
 * METRALE_KERNEL_CLUSTER rows) */
#define MK_KERNEL_WS_PAIR(name) \
  extern "C" __global__ void __launch_bounds__(mk_block(#name), 1) __cluster_dims__(mk_cluster(#name), 1, 1) name
constexpr unsigned kPairBf16 = mk_cluster("gemm_bf16_ws"), kPairBf16F32 = mk_cluster("gemm_bf16_f32_ws"),
                   kPairF16 = mk_cluster("gemm_f16_ws");

MK_KERNEL_WS_PAIR(gemm_bf16_ws)(bf16 *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {
  ws::gemm_tile_ws<bf16, false, kWsStagesBf16, true, 1, 256, 128, false, kPairBf16>(y, x, w, m, n, k);
}
MK_CHECK(gemm_bf16_ws, gemm);

MK_KERNEL_WS_PAIR(gemm_bf16_f32_ws)(float *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {
  ws::gemm_tile_ws<bf16, true, kWsStagesBf16, true, 1, 256, 128, false, kPairBf16F32>(y, x, w, m, n, k);
}
MK_CHECK(gemm_bf16_f32_ws, gemm);
static_assert(mk_block("gemm_bf16_f32_ws") == ws::THREADS && mk_shared("gemm_bf16_f32_ws") == mk_shared("gemm_bf16_ws"),
              "gemm_bf16_ws's tile with f32 out");

MK_KERNEL_WS(gemm_f32in_ws)(float *y, const float *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {
  ws::gemm_tile_ws<float, true, kWsStagesF32>(y, x, w, m, n, k);
}
MK_CHECK(gemm_f32in_ws, gemm);

MK_KERNEL_WS(gemm_f32in_hi_ws)(float *y, const float *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {
  ws::gemm_tile_ws<float, true, kWsStagesF32, false>(y, x, w, m, n, k);
}
MK_CHECK(gemm_f32in_hi_ws, gemm);

/* x and w IEEE halves in 16-bit storage (TMA copies bits, so bf16's maps serve), y f32 */
MK_KERNEL_WS_PAIR(gemm_f16_ws)(float *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {
  ws::gemm_tile_ws<bf16, true, kWsStagesBf16, true, 1, 256, 128, true, kPairF16>(y, x, w, m, n, k);
}
MK_CHECK(gemm_f16_ws, gemm);
static_assert(mk_block("gemm_f16_ws") == ws::THREADS && mk_shared("gemm_f16_ws") == mk_shared("gemm_bf16_ws"),
              "kernels.def: the bf16 ws tile's block and stages");

/* gemm_f16_ws's tiles over N = n0 + n1 + n2 columns, written to three outputs (ws::cols3) */
constexpr unsigned kPairF16C3 = mk_cluster("gemm_f16_ws_cols3");
/* Its walk goes down 16 tile rows (8 pairs) of a column before the next, not GROUP_M: the 66
 * clusters then hold ~8 columns of w (8 MiB) and 16 row tiles of x (8 MiB) in L2, and w comes
 * from DRAM once per 2048 rows instead of per 1024.  H200 (ncu, docs/perf-prefill.md, part 7):
 * at 4096 tokens 321 -> 316 us (DRAM reads 239 -> 147 MB), at 16384 1257 -> 1239 us (1.0 GB ->
 * 0.62 GB); 32 rows 319 / 1247 us, 64 rows 319 / 1300 (x no longer stays in L2). */
constexpr unsigned kColsGroupM = 16;
/* Its ring and output boxes (ws::out_boxes), which share the shared memory */
constexpr unsigned kColsStages = 8, kColsBoxes = 2;
MK_KERNEL_WS_PAIR(gemm_f16_ws_cols3)(float *y0, float *y1, float *y2, const bf16 *x, const bf16 *w, unsigned m,
                                     unsigned n0, unsigned n1, unsigned n2, unsigned k) {
  const ws::cols3 y = {y0, y1, y2, n0, n1, n2};
  ws::gemm_tile_ws<bf16, true, kColsStages, true, 1, 256, 128, true, kPairF16C3, kColsGroupM, kColsBoxes>(
      y, x, w, m, n0 + n1 + n2, k);
}
MK_CHECK(gemm_f16_ws_cols3, gemm);
static_assert(mk_block("gemm_f16_ws_cols3") == ws::THREADS &&
                  mk_shared("gemm_f16_ws_cols3") ==
                      1024u + kColsStages * ws::ring<bf16, kColsStages, 128, 256>::STAGE + ws::out_bytes(kColsBoxes),
              "kernels.def: the block, its ring and the output boxes (ws::out_boxes)");

/* gemm_f16_ws_cols3 with y0 (the mixed q|k|v, the conv's input) in IEEE half: its stores and
 * conv1d_prefill_l2norm_xh's loads take half the bytes (kernels.def) */
MK_KERNEL_WS_PAIR(gemm_f16_ws_cols3q)(uint16_t *y0, float *y1, float *y2, const bf16 *x, const bf16 *w, unsigned m,
                                      unsigned n0, unsigned n1, unsigned n2, unsigned k) {
  const ws::cols3q y = {y0, y1, y2, n0, n1, n2};
  ws::gemm_tile_ws<bf16, true, kColsStages, true, 1, 256, 128, true, kPairF16C3, kColsGroupM, kColsBoxes>(
      y, x, w, m, n0 + n1 + n2, k);
}
MK_CHECK(gemm_f16_ws_cols3q, gemm);
static_assert(mk_block("gemm_f16_ws_cols3q") == ws::THREADS &&
                  mk_shared("gemm_f16_ws_cols3q") == mk_shared("gemm_f16_ws_cols3") &&
                  mk_cluster("gemm_f16_ws_cols3q") == kPairF16C3,
              "kernels.def: gemm_f16_ws_cols3's block, ring, boxes and clusters");

/* BM x 256 tiles with K in `slices`, the slices of a tile one cluster (split_sum). */
#define MK_KERNEL_WS_SPLIT(name, XT, YT, BM, STAGES, slices) MK_KERNEL_WS_SPLIT_OF(name, XT, YT, BM, STAGES, slices, false)
/* F16: x and w IEEE halves (gemm_f16_ws's product), y f32 */
#define MK_KERNEL_WS_SPLIT_OF(name, XT, YT, BM, STAGES, slices, F16)                                          \
  extern "C" __global__ void __launch_bounds__(mk_block(#name), 1) __cluster_dims__(1, 1, slices)             \
  name(YT *y, const XT *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {                               \
    ws::gemm_tile_ws<XT, sizeof(YT) == 4, STAGES, true, slices, 256, BM, F16>(y, x, w, m, n, k);             \
  }                                                                                                           \
  MK_CHECK(name, gemm);                                                                                       \
  static_assert(mk_block(#name) == ws::THREADS &&                                                             \
                    mk_shared(#name) == STAGES * ws::ring<XT, STAGES, BM, 256>::STAGE + 1024u,                \
                "kernels.def rows: the ws block, the stages plus 1 KiB of alignment")
MK_KERNEL_WS_SPLIT(gemm_bf16_ws_splitk4, bf16, bf16, 128, kWsStagesBf16, 4);
MK_KERNEL_WS_SPLIT(gemm_bf16_ws_splitk8, bf16, bf16, 128, kWsStagesBf16, 8);
MK_KERNEL_WS_SPLIT(gemm_f32in_ws_splitk2, float, float, 128, kWsStagesF32, 2);
/* 64-row tiles (the two consumer warpgroups on the two halves of the columns) for up to 64
 * rows, where 128-row tiles run half their MMAs on rows that are not there: 9 stages of 20
 * KiB (bf16 x) or 8 of 24 KiB (f32 x). */
MK_KERNEL_WS_SPLIT(gemm_bf16_ws64_splitk8, bf16, bf16, 64, 9, 8);
MK_KERNEL_WS_SPLIT(gemm_f32in_ws64_splitk2, float, float, 64, 8, 2);
/* gemm_f16_ws's product on the split forms: in_proj at decode batches below the 128-row pairs */
MK_KERNEL_WS_SPLIT_OF(gemm_f16_ws_splitk2, bf16, float, 128, kWsStagesBf16, 2, true);
MK_KERNEL_WS_SPLIT_OF(gemm_f16_ws64_splitk2, bf16, float, 64, 9, 2, true);

/* 128x192 tiles for f32 x: where 256-wide tiles leave SMs idle and 192-wide ones do not
 * (in_proj at decode 192 / 256: 98 tiles of 256 on 132 SMs, 130 of 192). */
constexpr unsigned kWs192StagesF32 = 7;
static_assert(mk_shared("gemm_f32in_ws192") == kWs192StagesF32 * ws::ring<float, kWs192StagesF32, 128, 192>::STAGE + 1024u &&
                  mk_block("gemm_f32in_ws192") == ws::THREADS,
              "kernels.def rows: the stages plus 1 KiB of alignment, the ws block");
MK_KERNEL_WS(gemm_f32in_ws192)(float *y, const float *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {
  ws::gemm_tile_ws<float, true, kWs192StagesF32, true, 1, 192>(y, x, w, m, n, k);
}
MK_CHECK(gemm_f32in_ws192, gemm);
#endif

#if MK_GEMM_MMA && __CUDA_ARCH__ >= 900
/* Split K for small M (kernels.def gemm_*_splitk): grid (ceil(N/64), ceil(M/64), 4), the 4
 * blocks of a tile one cluster.  Only in the sm_90 images: elsewhere the kernels are
 * absent and the layer takes the 64x64 ones. */
constexpr unsigned kSplitK = 4;
#define MK_KERNEL_SPLITK(name) \
  extern "C" __global__ void __launch_bounds__(mk_block(#name)) __cluster_dims__(1, 1, kSplitK) name

/* Split K on the 128x128 wgmma tile (kernels.def gemm_bf16_t128_splitk): grid
 * (ceil(N/128), ceil(M/128), 8), the 8 blocks of a tile one cluster, the ring then the
 * partial tile in the launch's dynamic shared memory.  For a few hundred rows: out_proj at
 * decode batch 256 has 32 such tiles.  (The f32-x form, in_proj with 4 slices, was slower
 * than whole-K tiles: docs/perf-gemm.md.) */
#if MK_GEMM_WGMMA
constexpr unsigned kT128SplitBf16 = 8;
static_assert(mk_shared("gemm_bf16_t128_splitk") == 128u * tc::split_ld(128) * 4u + 1024u &&
                  128u * tc::split_ld(128) * 4u >= kT128StagesBf16 * 128u * (64u + 64u),
              "kernels.def METRALE_KERNEL_SHARED row: the ring, then the partial tile, plus 1 KiB of "
              "alignment");

/* One 128x128 bf16 tile with K in `slices`, the slices one cluster; two blocks an SM. */
#define MK_KERNEL_T128_SPLIT(name, slices)                                                   \
  extern "C" __global__ void __launch_bounds__(mk_block(#name), 2) __cluster_dims__(1, 1, slices) \
  name(bf16 *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n, unsigned k) {             \
    wg::gemm_tile_wg<kT128StagesBf16, bf16, false, slices>(y, x, w, m, n, k);                   \
  }
MK_KERNEL_T128_SPLIT(gemm_bf16_t128_splitk, kT128SplitBf16)
MK_CHECK(gemm_bf16_t128_splitk, gemm);
static_assert(mk_block("gemm_bf16_t128_splitk") == kBlock, "the tile mapping assumes 256 threads");

/* The same with K in 4 slices: at two blocks an SM the H200 holds only 30 clusters of 8 at
 * once, so out_proj at decode batch 256 (32 tiles) ran its last two clusters in a second wave
 * (docs/perf-gemm.md); 32 clusters of 4 all fit. */
constexpr unsigned kT128SplitBf16Quarter = 4;
static_assert(mk_shared("gemm_bf16_t128_splitk4") == mk_shared("gemm_bf16_t128_splitk"), "the same ring and tile");
MK_KERNEL_T128_SPLIT(gemm_bf16_t128_splitk4, kT128SplitBf16Quarter)
MK_CHECK(gemm_bf16_t128_splitk4, gemm);
static_assert(mk_block("gemm_bf16_t128_splitk4") == kBlock, "the tile mapping assumes 256 threads");
#endif

MK_KERNEL_SPLITK(gemm_bf16_splitk)(bf16 *y, const bf16 *x, const bf16 *w, unsigned m, unsigned n,
                                   unsigned k) {
  tc::gemm_tile<TM, TN, 6, bf16, false, false, kSplitK>(y, x, w, m, n, k);
}
MK_CHECK(gemm_bf16_splitk, gemm);

MK_KERNEL_SPLITK(gemm_f32in_splitk)(float *y, const float *x, const bf16 *w, unsigned m, unsigned n,
                                    unsigned k) {
  tc::gemm_tile<TM, TN, 4, float, true, false, kSplitK>(y, x, w, m, n, k);
}
MK_CHECK(gemm_f32in_splitk, gemm);
static_assert(mk_block("gemm_bf16_splitk") == kBlock && mk_block("gemm_f32in_splitk") == kBlock,
              "the tile mapping assumes 256 threads");
#endif

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
