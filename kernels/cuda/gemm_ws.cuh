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
 * The whole-K forms (SPLIT 1) are persistent: the grid's blocks walk the tile grid, block b
 * taking tiles b, b + blocks, ... (walk), so that a block sets up its barriers and tensor
 * maps once and the producer fills the ring with the next tile's first k steps while the
 * consumers store this one's; a grid of the tile grid's size gives one tile a block.  The
 * 16-bit x forms (gemm_bf16_ws, gemm_f16_ws) run as clusters of two blocks that compute the
 * two tile rows of a pair with the same w rows, each producer copying half of w into both
 * blocks' stages (PAIR 2): 16 KiB of L2 reads a block a k step instead of 24 (docs/perf-gemm.md,
 * "Pairs that walk").
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
/* PAIR 2 (the 16-bit x whole-K forms): a cluster of two blocks computes tile rows 2p and 2p + 1
 * of one tile column, i.e. the same BN w rows, and each block's producer copies half of them
 * into both blocks' stages (TMA multicast): a block reads BN / 2 w rows a stage from L2
 * instead of BN.  A stage is then free once the block's 256 consumer threads and one thread of
 * each of the partner's 8 consumer warps have released it (the partner's copies land in it). */
template <unsigned PAIR> struct empty_count { static constexpr unsigned value = CONSUMERS + (PAIR - 1u) * 8u; };

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
template <> struct tma_w_template<128> { static constexpr unsigned id = METRALE_TMA_BF16_K32_R128; }; /* half of 256 (PAIR) */

/* f32 x: the tile row that holds row g (0..7) of each 8 rows of a warp's A fragment.  In
 * f32_tile's layout, rows r and r ^ 1 hold a fragment read's two chunks in the same banks;
 * so the first half-warp (g 0..3) reads the even rows and the second the odd ones, and
 * every 8-byte read (tc::split_frag) is free of bank conflicts.  The accumulators' rows
 * follow (store). */
__device__ __forceinline__ unsigned frag_row(unsigned g) { return 2u * (g & 3u) + (g >> 2); }

/* The tiles a block computes, in the order it computes them.  SPLIT 1: items first, first +
 * stride, ... of the tile grid, whatever the launch grid, an item being a tile (PAIR 1) or
 * the pair of tile rows 2p, 2p + 1 of a tile column that a cluster of two computes, rank r
 * taking row 2p + r (PAIR 2; clusters (2, 1, 1): the grid's blocks numbered y * gx + x, two
 * by two); SPLIT > 1: its cluster's one tile (the launch grid is the tile grid).  Each tile
 * takes NT k steps from kt0; the ring's k steps are counted across tiles (step), so that its
 * stages' phases run on.  Items walk column-major within groups of GM tile rows (GROUP_M
 * unless the kernel says otherwise). */
template <unsigned SPLIT, unsigned BM, unsigned BN, unsigned PAIR = 1, unsigned GM = GROUP_M> struct walk {
  static_assert(PAIR == 1 || (PAIR == 2 && SPLIT == 1), "pairs of whole-K tiles");
  unsigned t; /* the item now; the rest is recomputed from M, N and the grid, held in no register */
  __device__ __forceinline__ walk() : t((blockIdx.y * gridDim.x + blockIdx.x) / PAIR) {}
  static __device__ __forceinline__ unsigned cols(unsigned N) { return (N + BN - 1) / BN; }
  static __device__ __forceinline__ unsigned rows(unsigned M) { return ((M + BM - 1) / BM + PAIR - 1) / PAIR; }
  __device__ __forceinline__ bool more(unsigned M, unsigned N) const { return t < rows(M) * cols(N); }
  __device__ __forceinline__ void next(unsigned M, unsigned N) {
    t += SPLIT > 1 ? rows(M) * cols(N) : gridDim.x * gridDim.y / PAIR;
  }
  /* this block's tile (rank: its place in the pair; a pair's second row may lie past M) */
  __device__ __forceinline__ void origin(unsigned M, unsigned N, unsigned rank, unsigned &m0, unsigned &n0) const {
    unsigned tm, tn;
    tile_of_index<GM / PAIR>(t, cols(N), rows(M), tm, tn);
    m0 = (tm * PAIR + rank) * BM;
    n0 = tn * BN;
  }
};

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

/* The producer's walk: for each k step kt of each of the block's tiles (origin m0, n0), in
 * order, once ring stage s is free (the consumers have released what it held NT.. steps
 * before), fill(s, m0, n0, kt). */
template <unsigned STAGES, unsigned SPLIT, unsigned BM, unsigned BN, unsigned PAIR, unsigned GM, typename F>
__device__ __forceinline__ void each_free_stage(uint64_t *empty, walk<SPLIT, BM, BN, PAIR, GM> wk, unsigned M, unsigned N,
                                                unsigned rank, unsigned NT, F &&fill) {
  for (unsigned step = 0; wk.more(M, N); wk.next(M, N)) {
    unsigned m0, n0;
    wk.origin(M, N, rank, m0, n0);
    for (unsigned kt = 0; kt < NT; kt++, step++) {
      const unsigned s = step % STAGES;
      if (step >= STAGES) mbar_wait(&empty[s], (step / STAGES - 1u) & 1u);
      fill(s, m0, n0, kt);
    }
  }
}

/* The producer warpgroup, TMA form: warp 0 makes the block's two tensor maps (x [M, K] and
 * w [N, K], from the templates the backend wrote into the module) and publishes them into
 * this SM's slot (one block an SM: nobody else uses it meanwhile); then one thread copies
 * the k steps of the block's tiles into the ring, an x box and a w box a stage (PAIR 2: half
 * of the w rows, into both blocks' stages), each stage announced on full[] with its byte
 * count, the boxes' parts outside the matrices landing as zeros. */
template <typename XT, unsigned STAGES, unsigned BM, unsigned BN, unsigned SPLIT, unsigned PAIR, unsigned GM>
__device__ __forceinline__ void produce_tma(uint32_t s0, uint64_t *full, uint64_t *empty, const XT *__restrict__ x,
                                            const bf16 *__restrict__ w, unsigned M, unsigned N, unsigned K,
                                            walk<SPLIT, BM, BN, PAIR, GM> wk, unsigned kt0, unsigned NT, unsigned rank) {
  using R = ring<XT, STAGES, BM, BN>;
  __shared__ __align__(128) uint64_t maps[2][METRALE_TMA_BYTES / 8];
  const unsigned tid = threadIdx.x % GROUP, lane = tid % 32u;
  if (tid >= 32u) return;
  unsigned char(*slot)[METRALE_TMA_BYTES] = metrale_gemm_ws_maps[sm90::sm_id() % 1024u]; /* %smid < 1024 so far */
  const unsigned tx = tma_template<XT, BM>::id, tw = tma_w_template<BN / PAIR>::id;
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
  each_free_stage<STAGES>(empty, wk, M, N, rank, NT, [&](unsigned s, unsigned m0, unsigned n0, unsigned kt) {
    const uint32_t at = s0 + s * R::STAGE;
    const int k = (int)((kt0 + kt) * BK);
    mbar_expect_tx(&full[s], R::STAGE); /* this block's x box and both halves of w */
    tma_load_2d(at, slot[0], k, (int)m0, &full[s]);
    if constexpr (PAIR == 1)
      tma_load_2d(at + R::A_BYTES, slot[1], k, (int)n0, &full[s]);
    else /* w rows [n0 + rank BN/2, + BN/2) into both blocks' stages */
      sm90::tma_load_2d_multicast(at + R::A_BYTES + rank * (R::B_BYTES / PAIR), slot[1], k,
                                  (int)(n0 + rank * (BN / PAIR)), &full[s], (uint16_t)((1u << PAIR) - 1u));
  });
}

/* The producer warpgroup for rows TMA cannot describe: element loads and shared stores by
 * all 128 threads in the stage layout, fenced for the tensor cores, one arrival each. */
template <typename XT, unsigned STAGES, unsigned BM, unsigned BN, unsigned SPLIT, unsigned PAIR, unsigned GM>
__device__ __forceinline__ void produce_elements(uint32_t s0, uint64_t *full, uint64_t *empty,
                                                 const XT *__restrict__ x, const bf16 *__restrict__ w,
                                                 unsigned M, unsigned N, unsigned K, walk<SPLIT, BM, BN, PAIR, GM> wk,
                                                 unsigned kt0, unsigned NT, unsigned rank) {
  using R = ring<XT, STAGES, BM, BN>;
  const unsigned tid = threadIdx.x % GROUP;
  each_free_stage<STAGES>(empty, wk, M, N, rank, NT, [&](unsigned s, unsigned m0, unsigned n0, unsigned kt) {
    load_stage<BM, BN, XT, GROUP, typename R::LX>(s0 + s * R::STAGE, x, w, M, N, K, m0, n0, kt0 + kt, false, false,
                                                  tid);
    fence_proxy_async();
    mbar_arrive(&full[s]);
  });
}

/* A barrier of the two consumer warpgroups only (named barrier 1; 0 is __syncthreads'). */
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(CONSUMERS) : "memory"); }

/* After ring step `step`'s MMAs were issued and the step before's are done (kt: the step
 * within the tile): this thread hands the step before's stage back (every consumer thread
 * arrives, releasing its own reads of the stage: with f32 x, the A fragments it loaded).  A
 * tile's last step is handed back once its MMAs are done (consume's end). */
template <unsigned STAGES, unsigned PAIR>
__device__ __forceinline__ void release_step(uint64_t *empty, unsigned step) {
  uint64_t *bar = &empty[step % STAGES];
  mbar_arrive(bar);
  if constexpr (PAIR > 1) { /* and lane 0 of each warp, once its lanes have, for the partner */
    __syncwarp();
    if (threadIdx.x % 32u == 0) sm90::mbar_arrive_cluster(bar, sm90::cluster_rank() ^ 1u);
  }
}
template <unsigned STAGES, unsigned PAIR>
__device__ __forceinline__ void release(uint64_t *empty, unsigned step, unsigned kt) {
  if (kt > 0) release_step<STAGES, PAIR>(empty, step - 1);
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

/* A consumer warpgroup (c = 0, 1: its part_of the tile) over the tile's k steps 0..NT-1, ring
 * steps step0.. (walk).
 * f32 x: LO adds the product of x's low part (x = hi + lo); without it x counts as bf16(x).
 * 16-bit x: F16 takes x and w as IEEE halves (gemm_f16_ws), else as bf16. */
template <typename XT, unsigned STAGES, bool LO, unsigned BM, unsigned BN, bool F16 = false, unsigned PAIR = 1>
__device__ __forceinline__ void consume(float (&acc)[part_of<BM, BN>::NACC], uint32_t s0, uint64_t *full,
                                        uint64_t *empty, unsigned c, unsigned step0, unsigned NT) {
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
      const unsigned step = step0 + kt, s = step % STAGES;
      mbar_wait(&full[s], (step / STAGES) & 1u);
      const uint32_t sa = s0 + s * R::STAGE;
      const uint64_t da = desc64(sa + P::row0(c) * 64u), db = desc64(sa + b_off);
      wgmma_fence();
      mma_ss::run(acc, da, db);
      mma_ss::run(acc, da + 2, db + 2); /* k 16..31: 32 bytes on, in 16-byte units */
      wgmma_commit();
      wgmma_wait<1>(); /* step kt - 1's MMAs are done: its stage is free */
      release<STAGES, PAIR>(empty, step, kt);
    }
  } else {
    /* A from registers: two sets, so that step kt's fragments are made while step kt - 1's
     * MMAs still read theirs */
    const unsigned ra = P::row0(c) + wq * 16u + frag_row(lane / 4u);
    uint32_t hi[2][2][4], lo[2][2][4];
    auto step = [&](unsigned kt, uint32_t(&h)[2][4], uint32_t(&l)[2][4]) {
      const unsigned g = step0 + kt, s = g % STAGES;
      mbar_wait(&full[s], (g / STAGES) & 1u);
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
      release<STAGES, PAIR>(empty, g, kt);
    };
    unsigned kt = 0;
    for (; kt + 1 < NT; kt += 2) {
      step(kt, hi[0], lo[0]);
      step(kt + 1, hi[1], lo[1]);
    }
    if (kt < NT) step(kt, hi[0], lo[0]);
  }
  wgmma_wait<0>();
  if (NT > 0) release_step<STAGES, PAIR>(empty, step0 + NT - 1); /* the tile's last stage */
  pin(acc);
}

/* An f32 output in three column ranges (gemm_f16_ws_cols3): product columns [0, n0) go to y0
 * [M, n0], [n0, n0 + n1) to y1 [M, n1], the rest to y2 [M, n2].  n0 and n1 are even and the
 * outputs 8-byte aligned (the launch rules), so a thread's two adjacent columns never straddle
 * two outputs and go out as one 8-byte store, as store_acc's do.  Y0 = uint16_t
 * (gemm_f16_ws_cols3q): y0 holds IEEE halves, each sum rounded to nearest even and saturated
 * at +-65504 (NaN stays NaN), a pair one 4-byte store. */
template <typename Y0> struct cols3_of {
  Y0 *y0;
  float *y1, *y2;
  unsigned n0, n1, n2;
};
using cols3 = cols3_of<float>;
using cols3q = cols3_of<uint16_t>;
template <typename Y> struct is_cols3 { static constexpr bool value = false; };
template <typename Y0> struct is_cols3<cols3_of<Y0>> { static constexpr bool value = true; };
/* two f32 as IEEE halves (lo in the low half), rounded to nearest even, finite values past
 * half's range and infinities saturated to +-65504 */
__device__ __forceinline__ uint32_t pack_half2_sat(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <typename Y0, unsigned NACC>
__device__ __forceinline__ void store_acc_cols3(const cols3_of<Y0> &y, const float (&acc)[NACC], unsigned M,
                                                unsigned row, unsigned n0, unsigned t) {
#pragma unroll
  for (unsigned j = 0; j < NACC / 4u; j++) {
    unsigned col = n0 + j * 8 + 2 * t, ld = y.n1;
    float *out = y.y1;
    if (col >= y.n0 + y.n1) {
      out = y.y2, ld = y.n2, col -= y.n0 + y.n1; /* past N: store2 writes nothing */
    } else if (col >= y.n0) {
      col -= y.n0;
    } else if constexpr (sizeof(Y0) == 2) { /* n0 even, y0 8-byte aligned: a pair is one word */
      uint32_t *h = reinterpret_cast<uint32_t *>(y.y0);
      if (row < M) h[((size_t)row * y.n0 + col) / 2u] = pack_half2_sat(acc[4 * j], acc[4 * j + 1]);
      if (row + 8 < M) h[((size_t)(row + 8) * y.n0 + col) / 2u] = pack_half2_sat(acc[4 * j + 2], acc[4 * j + 3]);
      continue;
    } else {
      out = y.y0, ld = y.n0;
    }
    if (row < M) store2<true>(out, ld, row, col, acc[4 * j], acc[4 * j + 1], ld % 2u == 0);
    if (row + 8 < M) store2<true>(out, ld, row + 8, col, acc[4 * j + 2], acc[4 * j + 3], ld % 2u == 0);
  }
}

/* cols3's outputs by TMA stores.  The register stores above issue, per warp and tile, 128
 * 8-byte stores of 8 rows each, and every SM issues them at the end of its tile at once: on
 * the H200 at 4096 tokens the GEMM took 263-265 us without them and 313-316 with
 * (docs/perf-prefill.md, part 7).  Here each consumer warp puts its 16 rows x 32 columns of
 * a box (2 KiB) into one of its OB buffers in shared memory, in the 128-byte swizzle
 * (conflict-free: a store instruction's 8 rows fall on distinct 16-byte chunks), and one
 * lane hands the box to the bulk engine, which writes whole lines while the warp goes on
 * with the next box and the next tile's MMAs.  The block makes the three outputs' maps
 * (template F32_K32_R16: [M, n_i] f32, rows n_i * 4 bytes apart) once; the maps clip the rows
 * past M and the columns past N.  Taken when every box lies in one output: n0 and n1
 * multiples of 32, each non-empty output 16-byte aligned with n_i a multiple of 4 (else
 * store_acc_cols3).  H200, in_proj at 4096 / 16384 tokens: 314-318 -> 302-306 us, 1232-1250
 * -> 1197-1210 us (ncu, three calls).  The 32 KiB of boxes fit beside the 8 ring stages;
 * stages traded for boxes lost (6 stages and 5 boxes a warp 328 us, 4 and 8 330), and two
 * boxes a wait or a warpgroup's 64-row boxes changed nothing (perf-prefill.md, part 9). */
constexpr unsigned OUT_COLS = 32, OUT_ROWS = 16, OUT_BOX = OUT_COLS * OUT_ROWS * 4u;
/* after the ring: OB boxes for each of the 8 consumer warps */
constexpr unsigned out_bytes(unsigned OB) { return 8u * OB * OUT_BOX; }
struct out_boxes {
  const unsigned char (*map)[METRALE_TMA_BYTES]; /* this SM's slots 2, 3, 4: y0, y1, y2 */
  uint32_t buf;                                  /* this warp's boxes */
  unsigned n;                                    /* boxes handed to the engine so far */
};
/* cols3q: y0's boxes hold 16 rows x 32 halves (64 bytes a row, template H16_K32_R16, the 64-byte
 * swizzle: chunk c of row r at c ^ (r / 2) % 4, conflict-free for the stores below), and its
 * rows need n0 a multiple of 8 (TMA strides are multiples of 16 bytes). */
template <typename Y0> __device__ __forceinline__ bool out_boxes_ok(const cols3_of<Y0> &y) {
  const void *p[3] = {y.y0, y.y1, y.y2};
  const unsigned n[3] = {y.n0, y.n1, y.n2};
  bool ok = y.n0 % OUT_COLS == 0 && y.n1 % OUT_COLS == 0;
#pragma unroll
  for (unsigned i = 0; i < 3; i++)
    ok = ok && (n[i] == 0 || (n[i] % (i == 0 && sizeof(Y0) == 2 ? 8u : 4u) == 0 && (uintptr_t)p[i] % 16u == 0));
  return ok;
}
/* One warp: the maps of the non-empty outputs into slots 2.. of this SM, published. */
template <typename Y0>
__device__ __forceinline__ void out_maps_publish(const cols3_of<Y0> &y, unsigned M,
                                                 unsigned char (*slot)[METRALE_TMA_BYTES]) {
  __shared__ __align__(128) uint64_t maps[3][METRALE_TMA_BYTES / 8];
  const unsigned lane = threadIdx.x % 32u;
  const void *p[3] = {y.y0, y.y1, y.y2};
  const unsigned n[3] = {y.n0, y.n1, y.n2}, eb[3] = {(unsigned)sizeof(Y0), 4u, 4u};
  for (unsigned i = lane; i < 3u * (METRALE_TMA_BYTES / 8); i += 32u) {
    const unsigned t = eb[i / 16u] == 2u ? METRALE_TMA_H16_K32_R16 : METRALE_TMA_F32_K32_R16;
    maps[i / 16u][i % 16u] = reinterpret_cast<const uint64_t *>(metrale_tma_templates[t])[i % 16u];
  }
  __syncwarp();
  if (lane == 0)
    for (unsigned i = 0; i < 3; i++)
      if (n[i]) sm90::tmap_set_2d(maps[i], p[i], n[i], M, (uint64_t)n[i] * eb[i]);
  __syncwarp();
  for (unsigned i = 0; i < 3; i++)
    if (n[i]) sm90::tmap_publish(slot[2 + i], maps[i]);
}
/* A consumer warp's 16 rows from row (of the product) and its NACC / 8 columns from col. */
template <unsigned OB, typename Y0, unsigned NACC>
__device__ __forceinline__ void store_acc_cols3_tma(const cols3_of<Y0> &y, const float (&acc)[NACC], unsigned M,
                                                    unsigned row, unsigned col, out_boxes &ob) {
  const unsigned lane = threadIdx.x % 32u, g = lane / 4u, t = lane % 4u, N = y.n0 + y.n1 + y.n2;
  if (row >= M) return; /* the warp's rows are all past M */
#pragma unroll
  for (unsigned b = 0; b < NACC / 16u; b++) { /* 4 accumulator groups of 8 columns a box */
    unsigned c = col + b * OUT_COLS, o = 0;
    if (c >= N) break;
    if (c >= y.n0 + y.n1) {
      o = 2, c -= y.n0 + y.n1;
    } else if (c >= y.n0) {
      o = 1, c -= y.n0;
    }
    const uint32_t box = ob.buf + (ob.n % OB) * OUT_BOX;
    if (ob.n >= OB) {
      if (lane == 0) sm90::bulk_wait_read_but<OB - 1>(); /* the box this buffer held has been read */
      __syncwarp();
    }
    if (sizeof(Y0) == 2 && o == 0) {
#pragma unroll
      for (unsigned jj = 0; jj < 4; jj++) { /* halves: chunk jj (8 columns) of row r at jj ^ (r / 2) % 4 */
        const unsigned j = 4 * b + jj;
        const uint32_t at = box + g * 64u + ((jj ^ ((g >> 1) & 3u)) << 4) + t * 4u;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(pack_half2_sat(acc[4 * j], acc[4 * j + 1]))
                     : "memory");
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at + 8u * 64u),
                     "r"(pack_half2_sat(acc[4 * j + 2], acc[4 * j + 3]))
                     : "memory");
      }
    } else {
#pragma unroll
      for (unsigned jj = 0; jj < 4; jj++) {
        const unsigned j = 4 * b + jj, cc = jj * 8 + 2 * t; /* f32_tile's swizzle: chunk cc/4 of row r at ^ r % 8 */
        const uint32_t at = box + g * 128u + (((cc >> 2) ^ g) << 4) + (cc & 3u) * 4u;
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(acc[4 * j]), "f"(acc[4 * j + 1])
                     : "memory");
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at + 8u * 128u), "f"(acc[4 * j + 2]),
                     "f"(acc[4 * j + 3])
                     : "memory");
      }
    }
    fence_proxy_async(); /* this lane's writes, for the engine */
    __syncwarp();
    if (lane == 0) {
      sm90::tma_store_2d(ob.map[2 + o], (int)c, (int)row, box);
      sm90::bulk_commit();
    }
    ob.n++;
  }
}

/* BM x BN tiles (128 rows by 256 or 192 columns, or 64 by 256), walked as walk<SPLIT, PAIR>
 * says.  SPLIT > 1: the SPLIT blocks of a cluster (1, 1, SPLIT) share one tile, block z walking
 * the k steps [KT*z/SPLIT, KT*(z+1)/SPLIT) (k_steps_of_block); the consumers leave their
 * partial tile over the ring and the cluster adds the partials in rank order (tc::split_sum,
 * by the consumers' 256 threads; the producer warps have exited by then).  PAIR 2: clusters
 * (2, 1, 1) sharing w (empty_count). */
template <typename XT, bool F32_OUT, unsigned STAGES, bool LO = true, unsigned SPLIT = 1, unsigned BN = 256,
          unsigned BM = 128, bool F16 = false, unsigned PAIR = 1, unsigned GM = GROUP_M, unsigned OB = 2, typename Y>
__device__ __forceinline__ void gemm_tile_ws(Y y, const XT *__restrict__ x, const bf16 *__restrict__ w,
                                             unsigned M, unsigned N, unsigned K) {
  constexpr bool C3 = is_cols3<Y>::value; /* y: a pointer, or three outputs (N = n0 + n1 + n2) */
  static_assert(!C3 || (F32_OUT && SPLIT == 1), "three f32 outputs, whole-K tiles");
  __shared__ uint64_t full[STAGES], empty[STAGES];
  const walk<SPLIT, BM, BN, PAIR, GM> tw0;
  if (!tw0.more(M, N)) return; /* a cluster's blocks share the item: all of them or none */
  unsigned kt0, NT;
  k_steps_of_block<SPLIT>((K + BK - 1) / BK, kt0, NT);
  /* early start (kernels.def rows: the whole-K forms, which prefill takes, and the fp16 split
   * forms of decode's in_proj): resident while the kernel before ends, nothing read or written
   * before the wait.  The other split-K and 64-row forms are launched as usual, where the wait
   * does nothing.  Either way the kernel after may start once every block runs. */
  mk_allow_next();
  mk_wait_prior();
  const uint32_t s0 = dyn_smem_base();
  const bool tma = tma_ok(x, w, K);
  const unsigned rank = PAIR > 1 ? sm90::cluster_rank() : 0u;
  if (threadIdx.x == 0) {
    for (unsigned s = 0; s < STAGES; s++) {
      sm90::mbar_init_count(&full[s], tma ? 1u : GROUP);
      sm90::mbar_init_count(&empty[s], empty_count<PAIR>::value);
    }
    sm90::mbar_init_fence();
  }
  bool boxes = false; /* C3: the outputs by TMA stores (out_boxes), their maps made by warp 4 */
  if constexpr (C3) {
    boxes = out_boxes_ok(y);
    if (boxes && threadIdx.x / 32u == 4u) out_maps_publish(y, M, metrale_gemm_ws_maps[sm90::sm_id() % 1024u]);
  }
  if constexpr (PAIR > 1)
    sm90::cluster_sync(); /* both blocks' barriers are ready before either copies or arrives */
  else
    __syncthreads();
  const unsigned wgi = threadIdx.x / GROUP;
  if (wgi == 0) {
    regs_dec<56>();
    if (tma)
      produce_tma<XT, STAGES, BM, BN, SPLIT, PAIR, GM>(s0, full, empty, x, w, M, N, K, tw0, kt0, NT, rank);
    else
      produce_elements<XT, STAGES, BM, BN, SPLIT, PAIR, GM>(s0, full, empty, x, w, M, N, K, tw0, kt0, NT, rank);
    if constexpr (PAIR > 1) {
      __syncwarp();
      sm90::cluster_sync(); /* see the end */
    }
    return; /* exited threads hold up no barrier, the cluster's included (PTX `exit`) */
  }
  regs_inc<224>();
  const unsigned c = wgi - 1u;
  using P = part_of<BM, BN>;
  const unsigned lane = threadIdx.x % 32u, wq = (threadIdx.x / 32u) % 4u;
  const unsigned g = sizeof(XT) == 2 ? lane / 4u : frag_row(lane / 4u); /* f32 x: the rows its fragments read (frag_row) */
  const unsigned row = P::row0(c) + wq * 16u + g, col0 = P::col0(c);
  float acc[P::NACC];
  unsigned step = 0;
  out_boxes ob{};
  if constexpr (C3) {
    ob.map = metrale_gemm_ws_maps[sm90::sm_id() % 1024u];
    ob.buf = s0 + STAGES * ring<XT, STAGES, BM, BN>::STAGE + (threadIdx.x / 32u - 4u) * OB * OUT_BOX;
    if (boxes && lane == 0)
      for (unsigned i = 0; i < 3; i++)
        if ((i == 0 ? y.n0 : i == 1 ? y.n1 : y.n2) != 0) sm90::tmap_acquire(ob.map[2 + i]);
  }
  for (walk<SPLIT, BM, BN, PAIR, GM> tw = tw0; tw.more(M, N); tw.next(M, N), step += NT) {
#pragma unroll
    for (unsigned i = 0; i < P::NACC; i++) acc[i] = 0.0f;
    consume<XT, STAGES, LO, BM, BN, F16, PAIR>(acc, s0, full, empty, c, step, NT);
    unsigned m0, n0;
    tw.origin(M, N, rank, m0, n0);
    if constexpr (C3) {
      if (boxes)
        store_acc_cols3_tma<OB>(y, acc, M, m0 + P::row0(c) + wq * 16u, n0 + col0, ob);
      else
        store_acc_cols3(y, acc, M, m0 + row, n0 + col0, lane % 4u);
    } else if constexpr (SPLIT > 1) {
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
    } else {
      wg::store_acc<F32_OUT>(y, acc, M, N, m0 + row, n0 + col0, lane % 4u); /* rows past M: none */
    }
  }
  if constexpr (C3)
    if (boxes && lane == 0) sm90::bulk_wait_all(); /* the boxes written before the block's memory goes */
  /* PAIR: neither block leaves while the other may still arrive on its barriers or copy into it */
  if constexpr (PAIR > 1) {
    __syncwarp();
    sm90::cluster_sync();
  }
}
}  // namespace ws
