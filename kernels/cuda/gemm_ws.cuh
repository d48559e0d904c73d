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
using sm90::mbar_wait;
using sm90::pin;
using sm90::wgmma_commit;
using sm90::wgmma_fence;
using sm90::wgmma_wait;
using wg::desc64;

/* The 128 f32 accumulators a thread of an m64n256 wgmma as asm operands %0..%127. */
#define MK_WS_ACC_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
#define MK_WS_ACC_OPS(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

struct mma_n256 {
  /* d += A . B^T, m64n256k16, A and B K-major bf16 in shared memory (descriptors) */
  static __device__ __forceinline__ void ss(float (&d)[128], uint64_t da, uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " MK_WS_ACC_REGS
                 "%128, %129, 1, 1, 1, 0, 0;\n"
                 : MK_WS_ACC_OPS(d)
                 : "l"(da), "l"(db));
  }
  /* the same with A in registers (the mma.m16n8k16 A fragment of each warp's 16 rows) */
  static __device__ __forceinline__ void rs(float (&d)[128], const uint32_t (&a)[4], uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " MK_WS_ACC_REGS
                 "{%128, %129, %130, %131}, %132, 1, 1, 1, 0;\n"
                 : MK_WS_ACC_OPS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
  }
};
#undef MK_WS_ACC_REGS
#undef MK_WS_ACC_OPS

__device__ __forceinline__ void mbar_init(uint64_t *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sm90::smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sm90::smem_u32(bar)) : "memory");
}
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
      mma_n256::ss(acc, da, db);
      mma_n256::ss(acc, da + 2, db + 2); /* k 16..31: 32 bytes on, in 16-byte units */
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
      if constexpr (LO) mma_n256::rs(acc, l[0], db);
      mma_n256::rs(acc, h[0], db);
      if constexpr (LO) mma_n256::rs(acc, l[1], db + 2);
      mma_n256::rs(acc, h[1], db + 2);
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
      mbar_init(&full[s], GROUP);
      mbar_init(&empty[s], CONSUMERS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
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

  const unsigned lane = threadIdx.x % 32u, wq = (threadIdx.x / 32u) % 4u, g = lane / 4u, t = lane % 4u;
  const bool pair = N % 2u == 0 && ((uintptr_t)y & (F32_OUT ? 7u : 3u)) == 0;
  const unsigned row = m0 + c * 64u + wq * 16u + g;
#pragma unroll
  for (unsigned j = 0; j < 32; j++) {
    const unsigned col = n0 + j * 8 + 2 * t;
    if (row < M) store2<F32_OUT>(y, N, row, col, acc[4 * j], acc[4 * j + 1], pair);
    if (row + 8 < M) store2<F32_OUT>(y, N, row + 8, col, acc[4 * j + 2], acc[4 * j + 3], pair);
  }
}
}  // namespace ws
