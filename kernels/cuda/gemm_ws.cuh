/* The sm_90a warp-specialised tile of gemm.cu (kernels.def gemm_bf16_ws, gemm_f32in_ws):
 * 128 x 256 outputs a block, one block an SM, 384 threads.
 *
 *   warpgroup 0 (producer, 56 registers a thread): copies k step kt of x [128 rows] and
 *     w [256 rows] into ring stage kt % STAGES (cp.async, tc's swizzled tile layout) once
 *     the consumers have released it (mbarrier empty), and hands it over with
 *     cp.async.mbarrier.arrive (mbarrier full), which counts when the copies have landed;
 *   warpgroups 1, 2 (consumers, 224 registers): rows 0-63 and 64-127 of the tile,
 *     m64n256k16 MMAs; each keeps one k step of MMAs in flight (wgmma.wait_group 1) and
 *     releases a stage as soon as the MMAs that read it are done.
 *
 * Why (docs/perf-gemm.md, "Warp-specialised 128x256 tiles"): the 128x128 tile of
 * gemm_wgmma.cuh pays a block barrier, a proxy fence and a full MMA drain every k step;
 * here nothing in the k loop waits for anything but its data, and a tile moves 25 % (bf16 x)
 * to 33 % (f32 x) fewer L2 bytes per FLOP.  Included by gemm.cu inside its sm_90a guard,
 * after gemm_wgmma.cuh. */
namespace ws {
using namespace tc;
using sm90::fence_proxy_async;
using sm90::mbar_arrive;
using sm90::mbar_wait;
using sm90::pin;
using sm90::wgmma_commit;
using sm90::wgmma_fence;
using sm90::wgmma_wait;
using wg::desc64;

/* wgmma m64n256k16 (sm90a.cuh), 128 accumulators a thread */
using mma_ss = sm90::wgmma_ss<256>;
using mma_rs = sm90::wgmma_rs<256>;

/* The barrier counts one arrival of this thread once all its earlier cp.async copies have
 * landed (noinc: the arrival is one of the count the barrier was made with). */
__device__ __forceinline__ void cp_arrive(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(sm90::smem_u32(bar)) : "memory");
}
/* The registers of this warpgroup's threads: fewer for the producer, more for the
 * consumers' 128 accumulators (the block's 64 K registers shared out again). */
template <unsigned R> __device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <unsigned R> __device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

constexpr unsigned BM = 128, BN = 256, THREADS = 384, GROUP = 128;
constexpr unsigned CONSUMERS = 256; /* each releases a stage: the empty barriers' count */

/* One k step of a consumer with f32 x: this thread's A fragments of k 0..15 and 16..31
 * (rows ra and ra + 8 of the stage's x tile at sa) split into hi and lo bf16, or (!LO) only
 * rounded to bf16. */
template <bool LO>
__device__ __forceinline__ void split_a(uint32_t sa, unsigned ra, unsigned lane, uint32_t (&hi)[2][4],
                                        uint32_t (&lo)[2][4]) {
  const unsigned rb = ra + 8;
#pragma unroll
  for (unsigned h = 0; h < 2; h++) {
    const unsigned c = h * 16 + 2 * (lane & 3u);
    const float2 v[4] = {lds_f2(sa + tile_of<float>::off(ra, c >> 2) + (c & 3u) * 4u),
                         lds_f2(sa + tile_of<float>::off(rb, c >> 2) + (c & 3u) * 4u),
                         lds_f2(sa + tile_of<float>::off(ra, (c + 8) >> 2) + (c & 3u) * 4u),
                         lds_f2(sa + tile_of<float>::off(rb, (c + 8) >> 2) + (c & 3u) * 4u)};
#pragma unroll
    for (unsigned i = 0; i < 4; i++) {
      if constexpr (LO)
        split_bf16(v[i], hi[h][i], lo[h][i]);
      else
        hi[h][i] = pack_bf16(v[i].x, v[i].y);
    }
  }
}

template <typename XT, unsigned STAGES> struct ring {
  static constexpr unsigned A_BYTES = BM * tile_of<XT>::ROW_BYTES, B_BYTES = BN * tile_of<bf16>::ROW_BYTES;
  static constexpr unsigned STAGE = A_BYTES + B_BYTES;
  static_assert(STAGE % 512u == 0 && A_BYTES % 512u == 0, "swizzle atoms stay aligned");
  static_assert(STAGES >= 3, "a ring with room for copies in flight");
};

/* A producer thread's share of one operand tile (ROWS x BK of T, tc's swizzled layout):
 * chunk c = tid % CHUNKS of rows r0 = tid / CHUNKS, r0 + STEP, ...  STEP is a multiple of 8,
 * so every row of a thread has the same swizzle: its chunks lie STEP rows apart in shared
 * memory as in global memory, and a stage costs a few instructions a chunk (the producer
 * warps issue every copy of the tile, and with tc::load_tile's per-chunk index arithmetic
 * they could not keep up with the MMAs). */
template <unsigned ROWS, typename T> struct tile_copier {
  using L = tile_of<T>;
  static constexpr unsigned STEP = GROUP / L::CHUNKS, PER = ROWS / STEP;
  static_assert(STEP % 8u == 0 && ROWS % STEP == 0, "one swizzle for all of a thread's rows");
  const T *base, *src; /* the matrix; row r0 at k = c * PER_CHUNK */
  size_t stride;       /* STEP rows, in elements */
  uint32_t dst;        /* row r0, chunk c in the tile */
  unsigned rows_left;  /* rows of the matrix from r0 on */
  unsigned kc;         /* c * PER_CHUNK */

  __device__ __forceinline__ tile_copier(const T *b, unsigned rows, unsigned K, unsigned row0, unsigned tid) {
    const unsigned r0 = tid / L::CHUNKS, c = tid % L::CHUNKS;
    base = b;
    kc = c * L::PER_CHUNK;
    src = b + (size_t)(row0 + r0) * K + kc;
    stride = (size_t)STEP * K;
    dst = L::off(r0, c);
    rows_left = rows > row0 + r0 ? rows - row0 - r0 : 0u;
  }
  /* k step kt into the tile at `at`: zeros outside the matrix (K % PER_CHUNK == 0 here, so
   * a chunk is wholly inside or outside) */
  __device__ __forceinline__ void copy(uint32_t at, unsigned kt, unsigned K) const {
    const bool kin = kt * BK + kc < K;
    const T *p = src + (size_t)kt * BK;
#pragma unroll
    for (unsigned i = 0; i < PER; i++) {
      const bool in = kin && i * STEP < rows_left;
      cp_async16(at + dst + i * STEP * L::ROW_BYTES, in ? p + i * stride : base, in ? 16u : 0u);
    }
  }
};

/* The producer warpgroup: k steps 0..NT-1 into the ring, each handed over on full[] by
 * cp.async.mbarrier.arrive: the barrier counts this thread's arrival once its copies (and
 * every earlier one) have landed, so the producer never waits for its own copies. */
template <typename XT, unsigned STAGES>
__device__ __forceinline__ void produce(uint32_t s0, uint64_t *full, uint64_t *empty, const XT *__restrict__ x,
                                        const bf16 *__restrict__ w, unsigned M, unsigned N, unsigned K,
                                        unsigned m0, unsigned n0, unsigned NT) {
  using R = ring<XT, STAGES>;
  const unsigned tid = threadIdx.x % GROUP;
  if (vec_ok(x, K) && vec_ok(w, K)) {
    const tile_copier<BM, XT> a(x, M, K, m0, tid);
    const tile_copier<BN, bf16> b(w, N, K, n0, tid);
    for (unsigned kt = 0; kt < NT; kt++) {
      const unsigned s = kt % STAGES;
      if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1u) & 1u);
      a.copy(s0 + s * R::STAGE, kt, K);
      b.copy(s0 + s * R::STAGE + R::A_BYTES, kt, K);
      cp_arrive(&full[s]);
    }
    return;
  }
  /* unaligned rows: element loads and shared stores, fenced for the tensor cores */
  for (unsigned kt = 0; kt < NT; kt++) {
    const unsigned s = kt % STAGES;
    if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1u) & 1u);
    load_stage<BM, BN, XT, GROUP>(s0 + s * R::STAGE, x, w, M, N, K, m0, n0, kt, false, false, tid);
    fence_proxy_async();
    mbar_arrive(&full[s]);
  }
}

/* After step kt's MMAs were issued and step kt - 1's are done: this thread hands step
 * kt - 1's stage back (every consumer thread arrives, releasing its own reads of the stage:
 * with f32 x, the A fragments it loaded). */
template <unsigned STAGES>
__device__ __forceinline__ void release(uint64_t *empty, unsigned kt) {
  if (kt > 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
}

/* A consumer warpgroup (c = 0, 1: rows 64 c .. 64 c + 63 of the tile) over k steps 0..NT-1.
 * f32 x: LO adds the product of x's low part (x = hi + lo); without it x counts as bf16(x). */
template <typename XT, unsigned STAGES, bool LO>
__device__ __forceinline__ void consume(float (&acc)[128], uint32_t s0, uint64_t *full, uint64_t *empty,
                                        unsigned c, unsigned NT) {
  using R = ring<XT, STAGES>;
  const unsigned lane = threadIdx.x % 32u, wq = (threadIdx.x / 32u) % 4u;
  pin(acc);
  if constexpr (sizeof(XT) == 2) {
    for (unsigned kt = 0; kt < NT; kt++) {
      const unsigned s = kt % STAGES;
      mbar_wait(&full[s], (kt / STAGES) & 1u);
      const uint32_t sa = s0 + s * R::STAGE;
      const uint64_t da = desc64(sa + c * 64u * 64u), db = desc64(sa + R::A_BYTES);
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
    const unsigned ra = c * 64u + wq * 16u + lane / 4u;
    uint32_t hi[2][2][4], lo[2][2][4];
    auto step = [&](unsigned kt, uint32_t(&h)[2][4], uint32_t(&l)[2][4]) {
      const unsigned s = kt % STAGES;
      mbar_wait(&full[s], (kt / STAGES) & 1u);
      const uint32_t sa = s0 + s * R::STAGE;
      const uint64_t db = desc64(sa + R::A_BYTES);
      split_a<LO>(sa, ra, lane, h, l);
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

template <typename XT, bool F32_OUT, unsigned STAGES, bool LO = true>
__device__ __forceinline__ void gemm_tile_ws(void *y, const XT *__restrict__ x, const bf16 *__restrict__ w,
                                             unsigned M, unsigned N, unsigned K) {
  __shared__ uint64_t full[STAGES], empty[STAGES];
  unsigned tm, tn;
  tile_of_block(tm, tn);
  const unsigned m0 = tm * BM, n0 = tn * BN;
  if (m0 >= M || n0 >= N) return;
  const uint32_t s0 = dyn_smem_base();
  if (threadIdx.x == 0) {
    for (unsigned s = 0; s < STAGES; s++) {
      sm90::mbar_init_count(&full[s], GROUP);
      sm90::mbar_init_count(&empty[s], CONSUMERS);
    }
    sm90::mbar_init_fence();
  }
  __syncthreads();
  const unsigned NT = (K + BK - 1) / BK, wgi = threadIdx.x / GROUP;
  if (wgi == 0) {
    regs_dec<56>();
    produce<XT, STAGES>(s0, full, empty, x, w, M, N, K, m0, n0, NT);
    return;
  }
  regs_inc<224>();
  const unsigned c = wgi - 1u;
  float acc[128];
#pragma unroll
  for (unsigned i = 0; i < 128; i++) acc[i] = 0.0f;
  consume<XT, STAGES, LO>(acc, s0, full, empty, c, NT);

  const unsigned lane = threadIdx.x % 32u, wq = (threadIdx.x / 32u) % 4u;
  wg::store_acc<F32_OUT>(y, acc, M, N, m0 + c * 64u + wq * 16u + lane / 4u, n0, lane % 4u);
}
}  // namespace ws
