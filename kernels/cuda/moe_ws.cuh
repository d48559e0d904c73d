/* The sm_90a grouped expert projections (kernels.def moe_gate_up_sorted_ws, moe_down_sorted_ws):
 * the op of moe_gate_up_sorted / moe_down_sorted on wgmma, warp-specialised as gemm_ws.cuh's
 * tiles are.  Block (y, x) of the grid (ceil(N/256), S) computes columns 256 y .. of slot x and,
 * when slot x + 1 holds the same expert's next 64 rows, of that slot too: the two slots share
 * every weight stage, so an expert's weights are streamed once for each two of its slots, and
 * the blocks of a slot's column tiles run side by side, so its gathered rows come from DRAM
 * once.  A block whose slot is empty, or is the second of such a pair (its expert's slot i
 * with i odd, found by looking back over the slots before it), returns at once.  384 threads,
 * one block an SM:
 *
 *   warpgroup 0 (producer): k step kt (32 deep) into ring stage kt % STAGES once the
 *     consumers have released it (mbarrier empty).  The expert's 256 weight rows come by one
 *     TMA copy (thread 0; a map of w as [E*N, K] rows, made at the block's start from the
 *     module's template), the pair's 128 activation rows, which are gathered (row i of slot x
 *     reads a[perm[p + i] / div]), by 16-byte cp.async copies, one row a thread.  A thread's
 *     copies of step kt are awaited LAG steps later (cp.async.wait_group), fenced for the
 *     async proxy and announced on the stage's full mbarrier, which completes on 129 arrivals
 *     and the TMA copy's bytes.  Shapes TMA or 16-byte copies cannot describe (K not a
 *     multiple of 8, unaligned bases, E*N past int32) are loaded element by element by all
 *     128 threads instead;
 *   warpgroups 1, 2 (consumers): warpgroup c takes slot x + c (warpgroup 2 returns when the
 *     pair has one slot), its 64 rows by all 256 columns: one m64n256k16 MMA per 16 of k, one
 *     k step in flight (wgmma.wait_group 1), releasing a stage when the MMAs that read it are
 *     done; then its rows are scattered to their places (rows past the slot's count and
 *     columns past N are not written).
 *
 * Why (docs/perf-moe.md): the mma.sync tiles of moe.cu stream the experts' weights at ~60 %
 * of the copy rate at prefill, each 64-row slot reading its expert's weights again; TMA copies
 * into an 8-stage ring keep ~128 KiB of weights in flight an SM without a thread touching
 * them.  Stage rows are 64 bytes with the 64-byte swizzle (sm80::swz64), the layout the TMA
 * template BF16_K32_R256 writes.
 * Included by moe.cu inside its sm_90a guard. */
namespace moews {
using sm80::cp_async16;
using sm80::cp_commit;
using sm80::cp_wait;
using sm80::swz64;
using sm90::desc_swz64;
using sm90::fence_proxy_async;
using sm90::mbar_arrive;
using sm90::mbar_expect_tx;
using sm90::mbar_wait;
using sm90::pin;
using sm90::wgmma_commit;
using sm90::wgmma_fence;
using sm90::wgmma_wait;

constexpr unsigned THREADS = 384, GROUP = 128;
constexpr unsigned SLOT = 64;                         /* rows of a slot (moe_sort) */
constexpr unsigned BM = 2 * SLOT, BN = 256, BK = 32, STAGES = 8;
/* k steps between a producer thread's copies and their arrival: the gathered rows' latency
 * (~1.3 us from L2) over about that many steps.  At most STAGES - 2, or the producer would
 * wait for a stage the consumers release only after the one it has yet to announce. */
constexpr unsigned LAG = 6;
constexpr unsigned ROW = BK * 2u; /* bytes of a stage row */
constexpr unsigned A_BYTES = BM * ROW, B_BYTES = BN * ROW, STAGE = A_BYTES + B_BYTES;
constexpr unsigned NACC = BN / 2; /* a consumer's accumulators: 64 rows x 256 columns */
static_assert(STAGE % 1024u == 0 && A_BYTES % 1024u == 0, "swizzle atoms stay aligned");
static_assert(LAG + 2u <= STAGES, "stage kt is announced before the producer waits for the release of stage kt - 1");
static_assert(BM == GROUP && ROW / 16u == 4u, "one activation row (4 chunks) a producer thread");

using sm90::regs_dec;
using sm90::regs_inc;

/* The launch's dynamic shared memory (moe.cu's moe_ring), its base rounded up to 1024 bytes
 * (the rows ask 1 KiB more). */
__device__ __forceinline__ uint32_t ring_base() { return (sm90::smem_u32(moe_ring) + 1023u) & ~1023u; }

/* The block's work: rows of slot x (and x + 1 when it is the same expert's next slot) by
 * columns n0 .. n0 + 255 of expert ex. */
struct pair_t {
  const bf16 *a; /* activation rows [*, K]: a tile row reads a[perm[..] / div] */
  unsigned div;
  const int *perm;
  unsigned r, K, N, n0;
  int ex, p0, m0, p1, m1; /* m1 = 0: one slot */
  unsigned half; /* SILU (moe_gate_up_silu_sorted_ws): N / 2, the up rows' offset; the stage's
                    256 w rows are gate rows n0 .. n0 + 127, then up rows half + n0 ..; else 0 */
};
/* The expert's w row that stage row i (< 256) holds. */
__device__ __forceinline__ unsigned w_row(const pair_t &pr, unsigned i) {
  return pr.half == 0 ? pr.n0 + i : i < BN / 2u ? pr.n0 + i : pr.half + pr.n0 + (i - BN / 2u);
}
__device__ __forceinline__ bool w_row_in(const pair_t &pr, unsigned i) {
  return pr.half == 0 ? pr.n0 + i < pr.N : pr.n0 + (i % (BN / 2u)) < pr.half;
}
/* The output row of row i (< 64) of slot c (0, 1) of the pair, -1 past the slot's rows. */
__device__ __forceinline__ int row_of(const pair_t &pr, unsigned c, unsigned i) {
  const int p = c ? pr.p1 : pr.p0, m = c ? pr.m1 : pr.m0;
  const int j = (int)i < m ? pr.perm[p + (int)i] : -1;
  return j >= 0 && (unsigned)j < pr.r ? j : -1;
}

/* The producer, fast form (map: w as [E*N, K] rows, published). */
__device__ __forceinline__ void produce_tma(uint32_t s0, uint64_t *full, uint64_t *empty, const pair_t &pr,
                                            const void *map) {
  const unsigned pt = threadIdx.x % GROUP, NT = (pr.K + BK - 1) / BK;
  const int aj = row_of(pr, pt / SLOT, pt % SLOT);
  const bf16 *src = aj >= 0 ? pr.a + (size_t)((unsigned)aj / pr.div) * pr.K : pr.a;
  const int row0 = (int)((unsigned)pr.ex * pr.N + pr.n0);
  if (pt == 0) sm90::tmap_acquire(map);
  for (unsigned kt = 0; kt < NT; kt++) {
    const unsigned s = kt % STAGES;
    if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1u) & 1u);
    const uint32_t at = s0 + s * STAGE;
    if (pt == 0) {
      mbar_expect_tx(&full[s], B_BYTES);
      if (pr.half == 0) {
        sm90::tma_load_2d(at + A_BYTES, map, (int)(kt * BK), row0, &full[s]);
      } else { /* 128-row boxes: the gate rows, then the up rows */
        sm90::tma_load_2d(at + A_BYTES, map, (int)(kt * BK), row0, &full[s]);
        sm90::tma_load_2d(at + A_BYTES + B_BYTES / 2u, map, (int)(kt * BK), row0 + (int)pr.half, &full[s]);
      }
    }
#pragma unroll
    for (unsigned c = 0; c < 4; c++) {
      const unsigned k = kt * BK + c * 8u;
      const bool in = aj >= 0 && k < pr.K;
      cp_async16(at + swz64(pt, c), in ? src + k : pr.a, in ? 16u : 0u);
    }
    cp_commit();
    if (kt >= LAG) {
      cp_wait<LAG>(); /* step kt - LAG's copies have landed */
      fence_proxy_async();
      mbar_arrive(&full[(kt - LAG) % STAGES]);
    }
  }
  cp_wait<0>();
  fence_proxy_async();
  for (unsigned kt = NT > LAG ? NT - LAG : 0u; kt < NT; kt++) mbar_arrive(&full[kt % STAGES]);
}

/* The producer for shapes the copies cannot describe: element loads, shared stores, a fence
 * and one arrival a thread a stage (full counts GROUP arrivals). */
__device__ __forceinline__ void produce_elements(uint32_t s0, uint64_t *full, uint64_t *empty, const pair_t &pr,
                                                 const bf16 *__restrict__ we) {
  const unsigned pt = threadIdx.x % GROUP, NT = (pr.K + BK - 1) / BK;
  constexpr unsigned CH = ROW / 16u; /* chunks a stage row */
  for (unsigned kt = 0; kt < NT; kt++) {
    const unsigned s = kt % STAGES;
    if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1u) & 1u);
    const uint32_t at = s0 + s * STAGE;
    for (unsigned q = pt; q < (BM + BN) * CH; q += GROUP) {
      const unsigned rr = q / CH, c = q % CH, k = kt * BK + c * 8u;
      const bf16 *src = nullptr;
      if (rr < BM) {
        const int aj = row_of(pr, rr / SLOT, rr % SLOT);
        if (aj >= 0) src = pr.a + (size_t)((unsigned)aj / pr.div) * pr.K;
      } else if (w_row_in(pr, rr - BM)) {
        src = we + (size_t)w_row(pr, rr - BM) * pr.K;
      }
      chunk_in(at + (rr < BM ? swz64(rr, c) : A_BYTES + swz64(rr - BM, c)), src, src != nullptr, pr.K, k, false);
    }
    fence_proxy_async();
    mbar_arrive(&full[s]);
  }
}

/* Consumer warpgroup c (slot c of the pair) over the k steps: acc += A_c (64 x 32) . B (256 x 32)^T. */
__device__ __forceinline__ void consume(float (&acc)[NACC], uint32_t s0, uint64_t *full, uint64_t *empty, unsigned c,
                                        unsigned NT) {
  using mma = sm90::wgmma_ss<BN>;
  pin(acc);
  for (unsigned kt = 0; kt < NT; kt++) {
    const unsigned s = kt % STAGES;
    mbar_wait(&full[s], (kt / STAGES) & 1u);
    const uint32_t sa = s0 + s * STAGE;
    const uint64_t da = desc_swz64(sa + c * SLOT * ROW), db = desc_swz64(sa + A_BYTES);
    wgmma_fence();
    mma::run(acc, da, db);
    mma::run(acc, da + 2, db + 2); /* k 16..31: 32 bytes on, in 16-byte units */
    wgmma_commit();
    wgmma_wait<1>(); /* step kt - 1's MMAs are done: its stage is free */
    if (kt > 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
  }
  wgmma_wait<0>();
  pin(acc);
}

template <bool F32_OUT>
__device__ __forceinline__ void store2(void *y, size_t o, float v0, float v1, bool pair, bool has1) {
  if (F32_OUT) {
    float *yf = static_cast<float *>(y);
    if (pair) *reinterpret_cast<float2 *>(yf + o) = make_float2(v0, v1);
    else {
      yf[o] = v0;
      if (has1) yf[o + 1] = v1;
    }
  } else {
    bf16 *yb = static_cast<bf16 *>(y);
    if (pair) *reinterpret_cast<uint32_t *>(yb + o) = bf16x2_rn(v0, v1);
    else {
      yb[o] = f32_to_bf16(v0);
      if (has1) yb[o + 1] = f32_to_bf16(v1);
    }
  }
}

/* Block (y, x): y[j, n0..] = w_e [N, K] . a[j / div] for the rows j of slot x and of its pair.
 * maps: this kernel's tensor-map slots, one an SM. */
/* SILU: moe_gate_up_silu_sorted_ws, y = act bf16 [R, N / 2] = silu(gate) * up of the f32 sums;
 * the block's 128 act columns n0 .. from gate rows n0 .. and up rows N / 2 + n0 .. */
template <bool F32_OUT, bool SILU = false>
__device__ __forceinline__ void sorted_pair(void *y, const bf16 *__restrict__ a, unsigned div,
                                            const int *__restrict__ perm, const int *__restrict__ tiles,
                                            const bf16 *__restrict__ w, unsigned r, unsigned K, unsigned N,
                                            unsigned e, unsigned char (*maps)[METRALE_TMA_BYTES]) {
  __shared__ uint64_t full[STAGES], empty[STAGES];
  __shared__ __align__(128) uint64_t map[METRALE_TMA_BYTES / 8];
  static_assert(!SILU || !F32_OUT, "act is bf16");
  const uint64_t x = blockIdx.y, S = slot_count(r, e);
  const unsigned n0 = blockIdx.x * (SILU ? BN / 2u : BN), NO = SILU ? N / 2u : N; /* NO: output row */
  if (x >= S || n0 >= NO || div == 0 || K == 0 || (SILU && N % 2u != 0)) return;
  slot_t s0l, s1l;
  if (!slot_at(x, tiles, r, e, s0l)) return;
  /* slot x is its expert's slot i: the i slots before it hold the same expert.  Odd i: the
   * block of slot x - 1 takes it.  The look back stops at 128 slots (8192 rows of one
   * expert); past that a slot counts as even, so a slot may be computed by two blocks, which
   * write the same values, and none is left out. */
  unsigned i = 0;
  while (i < x && i < 2u * SLOT && slot_at(x - 1 - i, tiles, r, e, s1l) && s1l.ex == s0l.ex) i++;
  if (i % 2u) return;
  const bool two = x + 1 < S && slot_at(x + 1, tiles, r, e, s1l) && s1l.ex == s0l.ex;
  const pair_t pr = {a, div, perm, r, K, N, n0, s0l.ex, s0l.p, s0l.m, two ? s1l.p : 0, two ? s1l.m : 0, SILU ? NO : 0u};
  const unsigned tid = threadIdx.x, wgi = tid / GROUP;
  const uint64_t wrows = (uint64_t)e * N;
  const bool fast = K % 8u == 0 && aligned16(a) && aligned16(w) && wrows + BN <= 0x7fffffffu;
  if (tid == 0) {
    for (unsigned s = 0; s < STAGES; s++) {
      sm90::mbar_init_count(&full[s], fast ? GROUP + 1u : GROUP);
      sm90::mbar_init_count(&empty[s], two ? 2u * GROUP : GROUP); /* the consumers with a slot */
    }
    sm90::mbar_init_fence();
  }
  __syncthreads();
  const uint32_t s0 = ring_base();
  if (wgi == 0) {
    regs_dec<56>();
    if (!fast) {
      produce_elements(s0, full, empty, pr, w + (size_t)pr.ex * N * K);
      return;
    }
    /* warp 0 makes w's map [E*N rows, K] from the template and publishes it in this SM's slot
     * (one block an SM: nobody else uses the slot meanwhile) */
    unsigned char *slot_map = nullptr;
    if (tid < 32u) {
      unsigned smid;
      asm volatile("mov.u32 %0, %%smid;\n" : "=r"(smid));
      slot_map = maps[smid % 1024u]; /* %smid < 1024 on every GPU so far */
      if (tid < 16u)
        map[tid] = reinterpret_cast<const uint64_t *>(
            metrale_tma_templates[SILU ? METRALE_TMA_BF16_K32_R128 : METRALE_TMA_BF16_K32_R256])[tid];
      __syncwarp();
      if (tid == 0) sm90::tmap_set_2d(map, w, K, (uint32_t)wrows, (uint64_t)K * sizeof(bf16));
      __syncwarp();
      sm90::tmap_publish(slot_map, map);
    }
    produce_tma(s0, full, empty, pr, slot_map);
    return;
  }
  regs_inc<224>();
  const unsigned c = wgi - 1u;
  if (c == 1 && !two) return; /* exited threads hold up no barrier */
  float acc[NACC];
#pragma unroll
  for (unsigned q = 0; q < NACC; q++) acc[q] = 0.0f;
  consume(acc, s0, full, empty, c, (K + BK - 1) / BK);
  /* the columns a thread stores: q < QN of 8 (SILU: act of gate column q and up column q + 16,
   * in acc's first half) */
  constexpr unsigned QN = SILU ? NACC / 8u : NACC / 4u;
  /* the value stored for acc index v < 4 QN: SILU: silu(gate) * up, by the fast exp and
   * division (an accurate expf and division on every value cost more than the separate
   * silu_mul kernel, docs/perf-moe.md), and only for the warps that store */
  auto val = [&](unsigned v) -> float {
    if constexpr (SILU) {
      const float g = acc[v];
      return __fdividef(g, 1.0f + __expf(-g)) * acc[v + 4u * QN];
    } else {
      return acc[v];
    }
  };

  const unsigned lane = tid % 32u, wq = (tid / 32u) % 4u, t4 = lane % 4u;
  const unsigned row = wq * 16u + lane / 4u;
  const bool even = NO % 2u == 0 && ((uintptr_t)y & (F32_OUT ? 7u : 3u)) == 0;
  if (!F32_OUT && NO % 4u == 0 && ((uintptr_t)y & 7u) == 0) {
    /* bf16 rows in 32-byte runs: the lanes of a quad hold 8 columns of a row a q (16 bytes),
     * so they trade bf16 pairs to hold 4 consecutive columns of 16 each and store 8 bytes,
     * one whole sector a row an instruction (two half sectors before) */
    const unsigned base = lane & ~3u, src = base + 2u * (t4 & 1u);
#pragma unroll
    for (unsigned h = 0; h < 2; h++) {
      const int j = row_of(pr, c, row + 8u * h);
      if (!__any_sync(0xffffffffu, j >= 0)) continue; /* a warp's 8 rows all past the slot's (decode) */
#pragma unroll
      for (unsigned p = 0; p < QN / 2u; p++) {
        const uint32_t lo = bf16x2_rn(val(8 * p + 2 * h), val(8 * p + 2 * h + 1)),
                       hi = bf16x2_rn(val(8 * p + 4 + 2 * h), val(8 * p + 4 + 2 * h + 1));
        const uint32_t a0 = __shfl_sync(0xffffffffu, lo, src), a1 = __shfl_sync(0xffffffffu, lo, src + 1u),
                       b0 = __shfl_sync(0xffffffffu, hi, src), b1 = __shfl_sync(0xffffffffu, hi, src + 1u);
        const unsigned col = n0 + p * 16u + 4u * t4;
        if (j >= 0 && col < NO)
          *reinterpret_cast<uint2 *>(static_cast<bf16 *>(y) + (size_t)j * NO + col) =
              t4 < 2u ? make_uint2(a0, a1) : make_uint2(b0, b1);
      }
    }
    return;
  }
#pragma unroll
  for (unsigned h = 0; h < 2; h++) {
    const int j = row_of(pr, c, row + 8u * h);
    if (j < 0) continue;
#pragma unroll
    for (unsigned q = 0; q < QN; q++) {
      const unsigned col = n0 + q * 8u + 2u * t4;
      if (col >= NO) continue;
      store2<F32_OUT>(y, (size_t)j * NO + col, val(4 * q + 2 * h), val(4 * q + 2 * h + 1), even && col + 1 < NO,
                      col + 1 < NO);
    }
  }
}
}  // namespace moews
