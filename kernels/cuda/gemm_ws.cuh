/* The sm_90a warp-specialised tile of gemm.cu (kernels.def gemm_bf16_ws, gemm_f32in_ws and
 * their split-K, 192-column and 64-row forms): BM x BN outputs a block (128 x 256; 128 x 192
 * where 256-wide tiles would leave SMs idle; 64 x 256 for up to 64 rows), one block an SM, 384
 * threads.
 *
 *   warpgroup 0 (producer, 56 registers a thread): one thread copies k step kt of x [BM
 *     rows] and w [BN rows] into ring stage kt % STAGES with two TMA copies once the
 *     consumers have released it (mbarrier empty); the copies complete the stage's full
 *     mbarrier when they have landed.  The tensor maps are made at the block's start from
 *     the backend's templates (tma_templates.h); rows that TMA cannot describe (K not a
 *     multiple of 16 bytes, unaligned bases) go through element loads by all 128 threads;
 *   warpgroups 1, 2 (consumers, 224 registers): rows 0-63 and 64-127 of the tile (m64nBNk16
 *     MMAs), or at BM = 64 all rows and column halves (m64n128k16; part_of); each keeps one
 *     k step of MMAs in flight (wgmma.wait_group 1) and releases a stage as soon as the MMAs
 *     that read it are done.
 *
 * Why (docs/perf-gemm.md, "Warp-specialised 128x256 tiles"): the 128x128 tile of
 * gemm_wgmma.cuh pays a block barrier, a proxy fence and a full MMA drain every k step;
 * here nothing in the k loop waits for anything but its data, and a tile moves 25 % (bf16 x)
 * to 33 % (f32 x) fewer L2 bytes per FLOP.  TMA instead of the producer's 16-byte cp.async
 * copies: those landed at ~28 bytes a cycle an SM and bounded the tiles ("TMA" there).
 * Included by gemm.cu inside its sm_90a guard, after gemm_wgmma.cuh. */
namespace ws {
using namespace tc;
using sm90::mbar_expect_tx;
using sm90::tma_load_2d;
using sm90::fence_proxy_async;
using sm90::mbar_arrive;
using sm90::mbar_wait;
using sm90::pin;
using sm90::wgmma_commit;
using sm90::wgmma_fence;
using sm90::wgmma_wait;
using wg::desc64;

/* The registers of this warpgroup's threads: fewer for the producer, more for the
 * consumers' 128 accumulators (the block's 64 K registers shared out again). */
using sm90::regs_dec;
using sm90::regs_inc;

constexpr unsigned THREADS = 384, GROUP = 128;
constexpr unsigned CONSUMERS = 256; /* each releases a stage: the empty barriers' count */

/* Stage layouts: what a TMA copy of the template's swizzle writes.  bf16 rows of 64 bytes
 * with the 64-byte swizzle are tc's tile_of<bf16> (16-byte chunk c of row r at c ^ (r/2 % 4));
 * f32 x rows of 128 bytes with the 128-byte swizzle put chunk c of row r at c ^ (r % 8). */
struct f32_tile {
  static constexpr unsigned ROW_BYTES = 128, CHUNKS = 8, PER_CHUNK = 4;
  static __device__ __forceinline__ uint32_t off(unsigned r, unsigned c) { return r * 128u + ((c ^ (r & 7u)) << 4); }
};
template <typename T> struct stage_tile { using type = tile_of<T>; };
template <> struct stage_tile<float> { using type = f32_tile; };
/* the x tile's map: BM rows */
template <typename XT, unsigned BM> struct tma_template;
template <> struct tma_template<bf16, 128> { static constexpr unsigned id = METRALE_TMA_BF16_K32_R128; };
template <> struct tma_template<float, 128> { static constexpr unsigned id = METRALE_TMA_F32_K32_R128; };
template <> struct tma_template<bf16, 64> { static constexpr unsigned id = METRALE_TMA_BF16_K32_R64; };
template <> struct tma_template<float, 64> { static constexpr unsigned id = METRALE_TMA_F32_K32_R64; };
/* the w tile's map: BN rows */
template <unsigned BN> struct tma_w_template;
template <> struct tma_w_template<256> { static constexpr unsigned id = METRALE_TMA_BF16_K32_R256; };
template <> struct tma_w_template<192> { static constexpr unsigned id = METRALE_TMA_BF16_K32_R192; };

/* f32 x: the tile row that holds row g (0..7) of each 8 rows of a warp's A fragment.  In
 * f32_tile's layout, rows r and r ^ 1 hold a fragment read's two chunks in the same banks;
 * so the first half-warp (g 0..3) reads the even rows and the second the odd ones, and
 * every 8-byte read (tc::split_frag) is free of bank conflicts.  The accumulators' rows
 * follow (store). */
__device__ __forceinline__ unsigned frag_row(unsigned g) { return 2u * (g & 3u) + (g >> 2); }

template <typename XT, unsigned STAGES, unsigned BM, unsigned BN> struct ring {
  using LX = typename stage_tile<XT>::type;
  static constexpr unsigned A_BYTES = BM * LX::ROW_BYTES, B_BYTES = BN * tile_of<bf16>::ROW_BYTES;
  static constexpr unsigned STAGE = A_BYTES + B_BYTES;
  static_assert(STAGE % 1024u == 0 && A_BYTES % 1024u == 0, "swizzle atoms (up to 1 KiB) stay aligned");
  static_assert(STAGES >= 3, "a ring with room for copies in flight");
};

/* Whether TMA can copy the operands: 16-byte aligned bases, rows a multiple of 16 bytes. */
template <typename XT> __device__ __forceinline__ bool tma_ok(const XT *x, const bf16 *w, unsigned K) {
  return vec_ok(x, K) && vec_ok(w, K);
}

/* The producer warpgroup, TMA form: warp 0 makes the block's two tensor maps (x [M, K] and
 * w [N, K], from the templates the backend wrote into the module) and publishes them into
 * this SM's slot (one block an SM: nobody else uses it meanwhile); then one thread copies k
 * steps 0..NT-1 into the ring, one x box and one w box a stage, each stage announced on
 * full[] with its byte count, the boxes' parts outside the matrices landing as zeros. */
template <typename XT, unsigned STAGES, unsigned BM, unsigned BN>
__device__ __forceinline__ void produce_tma(uint32_t s0, uint64_t *full, uint64_t *empty, const XT *__restrict__ x,
                                            const bf16 *__restrict__ w, unsigned M, unsigned N, unsigned K,
                                            unsigned m0, unsigned n0, unsigned kt0, unsigned NT) {
  using R = ring<XT, STAGES, BM, BN>;
  __shared__ __align__(128) uint64_t maps[2][METRALE_TMA_BYTES / 8];
  const unsigned tid = threadIdx.x % GROUP, lane = tid % 32u;
  if (tid >= 32u) return;
  unsigned smid;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(smid));
  unsigned char(*slot)[METRALE_TMA_BYTES] = metrale_gemm_ws_maps[smid % 1024u]; /* %smid < 1024 on every GPU so far */
  const unsigned tx = tma_template<XT, BM>::id, tw = tma_w_template<BN>::id;
  maps[lane / 16u][lane % 16u] = reinterpret_cast<const uint64_t *>(metrale_tma_templates[lane < 16u ? tx : tw])[lane % 16u];
  __syncwarp();
  if (lane == 0) {
    sm90::tmap_set_2d(maps[0], x, K, M, (uint64_t)K * sizeof(XT));
    sm90::tmap_set_2d(maps[1], w, K, N, (uint64_t)K * sizeof(bf16));
  }
  __syncwarp();
  sm90::tmap_publish(slot[0], maps[0]);
  sm90::tmap_publish(slot[1], maps[1]);
  if (lane != 0) return;
  sm90::tmap_acquire(slot[0]);
  sm90::tmap_acquire(slot[1]);
  for (unsigned kt = 0; kt < NT; kt++) {
    const unsigned s = kt % STAGES;
    if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1u) & 1u);
    const uint32_t at = s0 + s * R::STAGE;
    mbar_expect_tx(&full[s], R::STAGE);
    tma_load_2d(at, slot[0], (int)((kt0 + kt) * BK), (int)m0, &full[s]);
    tma_load_2d(at + R::A_BYTES, slot[1], (int)((kt0 + kt) * BK), (int)n0, &full[s]);
  }
}

/* The producer warpgroup for rows TMA cannot describe: element loads and shared stores by
 * all 128 threads in the stage layout, fenced for the tensor cores, one arrival each. */
template <typename XT, unsigned STAGES, unsigned BM, unsigned BN>
__device__ __forceinline__ void produce_elements(uint32_t s0, uint64_t *full, uint64_t *empty,
                                                 const XT *__restrict__ x, const bf16 *__restrict__ w,
                                                 unsigned M, unsigned N, unsigned K, unsigned m0, unsigned n0,
                                                 unsigned kt0, unsigned NT) {
  using R = ring<XT, STAGES, BM, BN>;
  const unsigned tid = threadIdx.x % GROUP;
  for (unsigned kt = 0; kt < NT; kt++) {
    const unsigned s = kt % STAGES;
    if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1u) & 1u);
    load_stage<BM, BN, XT, GROUP, typename R::LX>(s0 + s * R::STAGE, x, w, M, N, K, m0, n0, kt0 + kt, false, false,
                                                  tid);
    fence_proxy_async();
    mbar_arrive(&full[s]);
  }
}

/* A barrier of the two consumer warpgroups only (named barrier 1; 0 is __syncthreads'). */
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(CONSUMERS) : "memory"); }

/* After step kt's MMAs were issued and step kt - 1's are done: this thread hands step
 * kt - 1's stage back (every consumer thread arrives, releasing its own reads of the stage:
 * with f32 x, the A fragments it loaded). */
template <unsigned STAGES>
__device__ __forceinline__ void release(uint64_t *empty, unsigned kt) {
  if (kt > 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
}

/* What consumer warpgroup c (0, 1) of a BM x BN tile computes: 64 rows from row0 and CN
 * columns from col0 (BM 128: rows 64 c.., all columns; BM 64: all rows, columns c BN / 2..). */
template <unsigned BM, unsigned BN> struct part_of {
  static_assert(BM == 128 || BM == 64, "two consumer warpgroups of 64 rows");
  static constexpr unsigned CN = BM == 128 ? BN : BN / 2, NACC = CN / 2;
  static __device__ __forceinline__ unsigned row0(unsigned c) { return BM == 128 ? 64u * c : 0u; }
  static __device__ __forceinline__ unsigned col0(unsigned c) { return BM == 128 ? 0u : c * CN; }
};

/* The shared-memory MMA of 16-bit operands: bf16, or IEEE half (F16). */
template <bool F16, unsigned N> struct mma_ss_of { using type = sm90::wgmma_ss<N>; };
template <unsigned N> struct mma_ss_of<true, N> { using type = sm90::wgmma_ss_f16<N>; };

/* A consumer warpgroup (c = 0, 1: its part_of the tile) over k steps 0..NT-1.
 * f32 x: LO adds the product of x's low part (x = hi + lo); without it x counts as bf16(x).
 * 16-bit x: F16 takes x and w as IEEE halves (gemm_f16_ws), else as bf16. */
template <typename XT, unsigned STAGES, bool LO, unsigned BM, unsigned BN, bool F16 = false>
__device__ __forceinline__ void consume(float (&acc)[part_of<BM, BN>::NACC], uint32_t s0, uint64_t *full,
                                        uint64_t *empty, unsigned c, unsigned NT) {
  using R = ring<XT, STAGES, BM, BN>;
  using P = part_of<BM, BN>;
  using mma_ss = typename mma_ss_of<F16, P::CN>::type;
  using mma_rs = sm90::wgmma_rs<P::CN>;
  static_assert(!F16 || sizeof(XT) == 2, "IEEE half operands come from 16-bit x");
  const uint32_t b_off = R::A_BYTES + P::col0(c) * tile_of<bf16>::ROW_BYTES; /* this part's w rows */
  const unsigned lane = threadIdx.x % 32u, wq = (threadIdx.x / 32u) % 4u;
  pin(acc);
  if constexpr (sizeof(XT) == 2) {
    for (unsigned kt = 0; kt < NT; kt++) {
      const unsigned s = kt % STAGES;
      mbar_wait(&full[s], (kt / STAGES) & 1u);
      const uint32_t sa = s0 + s * R::STAGE;
      const uint64_t da = desc64(sa + P::row0(c) * 64u), db = desc64(sa + b_off);
      wgmma_fence();
      mma_ss::run(acc, da, db);
      mma_ss::run(acc, da + 2, db + 2); /* k 16..31: 32 bytes on, in 16-byte units */
      wgmma_commit();
      wgmma_wait<1>(); /* step kt - 1's MMAs are done: its stage is free */
      release<STAGES>(empty, kt);
    }
  } else {
    /* A from registers: two sets, so that step kt's fragments are made while step kt - 1's
     * MMAs still read theirs */
    const unsigned ra = P::row0(c) + wq * 16u + frag_row(lane / 4u);
    uint32_t hi[2][2][4], lo[2][2][4];
    auto step = [&](unsigned kt, uint32_t(&h)[2][4], uint32_t(&l)[2][4]) {
      const unsigned s = kt % STAGES;
      mbar_wait(&full[s], (kt / STAGES) & 1u);
      const uint32_t sa = s0 + s * R::STAGE;
      const uint64_t db = desc64(sa + b_off);
#pragma unroll
      for (unsigned k16 = 0; k16 < 2; k16++) /* k 0..15 and 16..31 of the step, in f32_tile's layout */
        split_frag<f32_tile, LO>(sa, ra, k16 * 16 + 2 * (lane % 4u), h[k16], l[k16]);
      wgmma_fence();
      if constexpr (LO) mma_rs::run(acc, l[0], db);
      mma_rs::run(acc, h[0], db);
      if constexpr (LO) mma_rs::run(acc, l[1], db + 2);
      mma_rs::run(acc, h[1], db + 2);
      wgmma_commit();
      wgmma_wait<1>();
      release<STAGES>(empty, kt);
    };
    unsigned kt = 0;
    for (; kt + 1 < NT; kt += 2) {
      step(kt, hi[0], lo[0]);
      step(kt + 1, hi[1], lo[1]);
    }
    if (kt < NT) step(kt, hi[0], lo[0]);
  }
  wgmma_wait<0>();
  pin(acc);
}

/* One BM x BN tile (128 rows by 256 or 192 columns, or 64 by 256).  SPLIT > 1: the SPLIT
 * blocks of a cluster (1, 1, SPLIT) share it, block z
 * walking the k steps [KT*z/SPLIT, KT*(z+1)/SPLIT) (k_steps_of_block); the consumers leave their
 * partial tile over the ring and the cluster adds the partials in rank order (tc::split_sum,
 * by the consumers' 256 threads; the producer warps have exited by then). */
template <typename XT, bool F32_OUT, unsigned STAGES, bool LO = true, unsigned SPLIT = 1, unsigned BN = 256,
          unsigned BM = 128, bool F16 = false>
__device__ __forceinline__ void gemm_tile_ws(void *y, const XT *__restrict__ x, const bf16 *__restrict__ w,
                                             unsigned M, unsigned N, unsigned K) {
  __shared__ uint64_t full[STAGES], empty[STAGES];
  unsigned tm, tn;
  tile_of_block(tm, tn);
  const unsigned m0 = tm * BM, n0 = tn * BN;
  if (m0 >= M || n0 >= N) return; /* a cluster's blocks share the tile: all of them or none */
  unsigned kt0, NT;
  k_steps_of_block<SPLIT>((K + BK - 1) / BK, kt0, NT);
  /* early start (kernels.def rows: the whole-K forms, which prefill takes): resident while the
   * kernel before ends, nothing read or written before the wait.  The split-K and 64-row forms
   * are launched as usual, where the wait does nothing.  Either way the kernel after may start
   * once every block runs. */
  mk_allow_next();
  mk_wait_prior();
  const uint32_t s0 = dyn_smem_base();
  const bool tma = tma_ok(x, w, K);
  if (threadIdx.x == 0) {
    for (unsigned s = 0; s < STAGES; s++) {
      sm90::mbar_init_count(&full[s], tma ? 1u : GROUP);
      sm90::mbar_init_count(&empty[s], CONSUMERS);
    }
    sm90::mbar_init_fence();
  }
  __syncthreads();
  const unsigned wgi = threadIdx.x / GROUP;
  if (wgi == 0) {
    regs_dec<56>();
    if (tma)
      produce_tma<XT, STAGES, BM, BN>(s0, full, empty, x, w, M, N, K, m0, n0, kt0, NT);
    else
      produce_elements<XT, STAGES, BM, BN>(s0, full, empty, x, w, M, N, K, m0, n0, kt0, NT);
    return; /* exited threads hold up no barrier, the cluster's included (PTX `exit`) */
  }
  regs_inc<224>();
  const unsigned c = wgi - 1u;
  using P = part_of<BM, BN>;
  float acc[P::NACC];
#pragma unroll
  for (unsigned i = 0; i < P::NACC; i++) acc[i] = 0.0f;
  consume<XT, STAGES, LO, BM, BN, F16>(acc, s0, full, empty, c, NT);

  const unsigned lane = threadIdx.x % 32u, wq = (threadIdx.x / 32u) % 4u;
  const unsigned g = sizeof(XT) == 2 ? lane / 4u : frag_row(lane / 4u); /* f32 x: the rows its fragments read (frag_row) */
  const unsigned row = P::row0(c) + wq * 16u + g, col0 = P::col0(c);
  if constexpr (SPLIT > 1) {
    constexpr unsigned LD = split_ld(BN);
    static_assert(BM * LD * 4u <= STAGES * ring<XT, STAGES, BM, BN>::STAGE, "the partial tile fits over the ring");
    float *part = reinterpret_cast<float *>(gemm_dyn_smem + (s0 - smem_addr(gemm_dyn_smem)));
    consumers_sync(); /* both warpgroups' MMAs are done with the ring (every copy had landed) */
#pragma unroll
    for (unsigned j = 0; j < P::CN / 8; j++) {
      const unsigned col = col0 + j * 8 + 2 * (lane % 4u);
      *reinterpret_cast<float2 *>(part + row * LD + col) = make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2 *>(part + (row + 8) * LD + col) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
    split_sum<BM, BN, SPLIT, F32_OUT>(y, part, M, N, m0, n0, threadIdx.x - GROUP);
    return;
  }
  wg::store_acc<F32_OUT>(y, acc, M, N, m0 + row, n0 + col0, lane % 4u);
}
}  // namespace ws
