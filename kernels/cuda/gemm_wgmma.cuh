/* The sm_90a tile of gemm.cu: wgmma (warpgroup MMA) fed by tc::gemm_tile's cp.async
 * stages.  Included by gemm.cu inside its sm_90a guard, after namespace tc. */
namespace wg {
using namespace tc;
using sm90::fence_proxy_async;
using sm90::pin;
using sm90::wgmma_commit;
using sm90::wgmma_fence;
using sm90::wgmma_wait0;

/* Descriptor of a K-major bf16 tile in tc's layout (64-byte rows, tile_of<bf16>): sm90a.cuh */
__device__ __forceinline__ uint64_t desc64(uint32_t addr) { return sm90::desc_swz64(addr); }

/* wgmma m64n128k16 (sm90a.cuh), 64 accumulators a thread.  (A 128x256 tile on m64n256k16,
 * one block an SM, ran the f32-input projection 20% slower than two 128x128 blocks an SM:
 * docs/perf-gemm.md; gemm_ws.cuh's warp-specialised form made that tile pay.) */
using mma_ss = sm90::wgmma_ss<128>;
using mma_rs = sm90::wgmma_rs<128>;

/* A warpgroup's wgmma accumulators (8-column tile j in registers 4 j .. 4 j + 3: rows row and
 * row + 8, columns 2 t and 2 t + 1 of the tile) into y [M, N] from column n0, rows past M
 * left out.  Shared by the 128x128 tile here and gemm_ws.cuh's 128x256 one. */
template <bool F32_OUT, unsigned NACC>
__device__ __forceinline__ void store_acc(void *y, const float (&acc)[NACC], unsigned M, unsigned N,
                                          unsigned row, unsigned n0, unsigned t) {
  const bool pair = N % 2u == 0 && ((uintptr_t)y & (F32_OUT ? 7u : 3u)) == 0;
#pragma unroll
  for (unsigned j = 0; j < NACC / 4u; j++) {
    const unsigned col = n0 + j * 8 + 2 * t;
    if (row < M) store2<F32_OUT>(y, N, row, col, acc[4 * j], acc[4 * j + 1], pair);
    if (row + 8 < M) store2<F32_OUT>(y, N, row + 8, col, acc[4 * j + 2], acc[4 * j + 3], pair);
  }
}

/* 128x128 tile, two warpgroups of 64 rows each, m64n128k16 per k16 step; the stages are
 * those of tc::gemm_tile, in the launch's dynamic shared memory.  bf16 x: A from shared
 * memory; f32 x: A split into hi and lo in registers (two MMAs).  SPLIT > 1: the SPLIT
 * blocks of a cluster (1, 1, SPLIT) share the tile, block z a slice of the k steps, and
 * add their partial tiles in rank order (tc::split_sum). */
template <unsigned STAGES, typename XT, bool F32_OUT, unsigned SPLIT = 1>
__device__ __forceinline__ void gemm_tile_wg(void *y, const XT *__restrict__ x,
                                             const bf16 *__restrict__ w, unsigned M, unsigned N,
                                             unsigned K) {
  constexpr unsigned BM = 128, BN = 128;
  constexpr unsigned A_BYTES = BM * tile_of<XT>::ROW_BYTES, B_BYTES = BN * tile_of<bf16>::ROW_BYTES;
  constexpr unsigned STAGE = A_BYTES + B_BYTES;
  static_assert(STAGE % 512u == 0 && A_BYTES % 512u == 0, "swizzle atoms stay aligned");
  static_assert(STAGES >= 2, "a ring");

  unsigned tm, tn;
  tile_of_block(tm, tn);
  const unsigned m0 = tm * BM, n0 = tn * BN;
  if (m0 >= M || n0 >= N) return;
  const unsigned lane = threadIdx.x % 32u, wgi = threadIdx.x / 128u, wq = (threadIdx.x / 32u) % 4u;
  const bool vx = vec_ok(x, K), vw = vec_ok(w, K);
  const unsigned KT = (K + BK - 1) / BK;
  unsigned kt0, NT; /* this block's k steps [kt0, kt0 + NT) */
  k_steps_of_block<SPLIT>(KT, kt0, NT);
  const uint32_t s0 = dyn_smem_base();

  float acc[64];
#pragma unroll
  for (unsigned i = 0; i < 64; i++) acc[i] = 0.0f;

#pragma unroll
  for (unsigned s = 0; s + 1 < STAGES; s++) {
    if (s < NT) load_stage<BM, BN>(s0 + s * STAGE, x, w, M, N, K, m0, n0, kt0 + s, vx, vw);
    cp_commit();
  }

  for (unsigned kt = 0; kt < NT; kt++) {
    cp_wait<STAGES - 2>();
    fence_proxy_async(); /* the tensor cores read what this thread's copies wrote */
    __syncthreads();     /* also: every warpgroup finished with stage kt-1 (wait0 below) */
    const unsigned nk = kt + STAGES - 1;
    if (nk < NT) load_stage<BM, BN>(s0 + (nk % STAGES) * STAGE, x, w, M, N, K, m0, n0, kt0 + nk, vx, vw);
    cp_commit();

    const uint32_t sa = s0 + (kt % STAGES) * STAGE, sb = sa + A_BYTES;
    const uint64_t db = desc64(sb);
    if constexpr (sizeof(XT) == 2) {
      const uint64_t da = desc64(sa + wgi * 64u * 64u);
      pin(acc);
      wgmma_fence();
      mma_ss::run(acc, da, db);
      mma_ss::run(acc, da + 2, db + 2); /* k 16..31: 32 bytes on, in 16-byte units */
      wgmma_commit();
      wgmma_wait0();
      pin(acc);
    } else {
      const unsigned ra = wgi * 64u + wq * 16u + (lane >> 2);
      uint32_t hi[2][4], lo[2][4];
#pragma unroll
      for (unsigned h = 0; h < 2; h++) split_frag<tile_of<float>>(sa, ra, h * 16 + 2 * (lane & 3u), hi[h], lo[h]);
      pin(acc);
      wgmma_fence();
      mma_rs::run(acc, lo[0], db);
      mma_rs::run(acc, hi[0], db);
      mma_rs::run(acc, lo[1], db + 2);
      mma_rs::run(acc, hi[1], db + 2);
      wgmma_commit();
      wgmma_wait0();
      pin(acc);
    }
  }
  cp_wait<0>();

  const unsigned g = lane >> 2, t = lane & 3u;
  if constexpr (SPLIT > 1) { /* the partial tile over the ring, then the cluster's sum */
    constexpr unsigned LD = split_ld(BN);
    float *part = reinterpret_cast<float *>(gemm_dyn_smem + (s0 - smem_addr(gemm_dyn_smem)));
    __syncthreads(); /* every warpgroup's MMAs (waited for) and copies are done with the ring */
    const unsigned r = wgi * 64u + wq * 16u + g;
#pragma unroll
    for (unsigned j = 0; j < 16; j++) {
      const unsigned c = j * 8 + 2 * t;
      *reinterpret_cast<float2 *>(part + r * LD + c) = make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2 *>(part + (r + 8) * LD + c) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
    split_sum<BM, BN, SPLIT, F32_OUT>(y, part, M, N, m0, n0);
    return;
  }
  store_acc<F32_OUT>(y, acc, M, N, m0 + wgi * 64u + wq * 16u + g, n0, t);
}
}  // namespace wg
