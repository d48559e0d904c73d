/* Phase 1 of delta_rule_prefill_chunked_f16 with the state in registers, sm_90a
 * (kernels.def delta_rule_prefill_chunked_f16_scan64).  Included by gdn_chunked.cu inside its
 * anonymous namespace and sm_90a guard, after gdn_chunked_wg16.cuh.
 *
 * The block (one warpgroup) owns 64 value columns of a head and keeps its slice of the state
 * transposed, S^T [64 columns, dk], as the accumulators of an m64n128 wgmma.  The chunk step of
 * gdn_chunked_wg16.cuh, transposed:
 *   D^T [64, 64 tokens] = U^T + S^T (-W)^T        k over dk
 *   S^T [64, dk]        = e^(G_L) S^T + D^T Kd     k over the chunk's tokens
 *   O^T [64, 64 tokens] = S^T Qs^T + D^T M^T       k over dk, then over the tokens
 * S^T and D^T are A operands taken from registers: an m64nN accumulator rounded to fp16 pair by
 * pair is the A fragment of N / 16 k steps (the same rows and columns a thread).  The record's
 * planes are the B operands as phase 0 wrote them: a K-major m64 x k16 block of A tiles is a
 * K-major n64 x k16 block of B (Kd^T's n128 likewise), with the same descriptors.  So neither S
 * nor D goes through shared memory, and a chunk step has no block barrier and no proxy fence:
 * MMA groups, each thread's own conversions, and one mbarrier wait for the record's planes, which
 * the bulk engine copies three records ahead into a ring of three buffers.
 *
 * Range: as in gdn_chunked_wg16.cuh the accumulators hold S, U, D and O times a power of two,
 * here one a value column (a row of S^T, whose four lanes agree on it: nothing is shared between
 * rows, so no barrier); S's largest |value| of the row is brought into [2^5, 2^6) before each
 * step, and a D past 2^15 brings its row down within the step.
 *
 * Lanes: warp w, lane g = lane / 4, t = lane % 4 holds rows (value columns of the block) 16 w + g
 * (hf 0) and 16 w + g + 8 (hf 1); accumulator index 4 j + 2 hf + e is column 8 j + 2 t + e
 * (k for S^T, the chunk's token for D^T and O^T). */

namespace scan64 {
constexpr unsigned kBV = 64; /* value columns a block: the MMAs' m */
constexpr unsigned kNB = 3;  /* records in shared memory: one in use, two arriving */
struct layout {              /* bytes of dynamic shared memory */
  static constexpr unsigned RP = f16::layout::RP, RM = f16::layout::RM;
  static constexpr unsigned LU = kCh + 4; /* U's row stride in floats (read_u: distinct banks) */
  /* within a buffer: the record's four planes, then the block's 64 columns of U [64 tokens, LU] f32,
   * whose bytes stage the last chunk's O once U is read (a warp's [64 tokens, 16 columns] bf16) */
  static constexpr unsigned W = 0, Q = RP, K = 2 * RP, M = 3 * RP, U = 3 * RP + RM, BUF = U + kCh * LU * 4;
  static constexpr unsigned OW = kCh * 32;
  static constexpr unsigned BAR = kNB * BUF; /* full[kNB], empty[kNB] */
  static constexpr unsigned end = BAR + 2 * kNB * 8;
  /* a record's arrivals: the four planes' bulk copies (one thread), then each thread once its
   * cp.async share of U has landed (cp.async.mbarrier.arrive.noinc) */
  static constexpr unsigned COPIES = 4 + 128;
};
static_assert(layout::BUF % 128u == 0 && layout::U % 128u == 0 && 4 * layout::OW <= kCh * layout::LU * 4,
              "aligned buffers; O's staging fits in U's bytes");
/* descriptor steps (16-byte units): a k16 tile of -W, Qs, M (four 16-row tiles), of Kd^T (eight) */
constexpr uint64_t kStep64 = kTileBlock >> 4, kStep128 = (2 * kTileBlock) >> 4;
using RS64 = sm90::wgmma_rs_f16<64>;
using RS128 = sm90::wgmma_rs_f16<128>;

/* The A fragments of KS k steps from a thread's accumulators (m64n(16 KS)), row hf times f[hf],
 * rounded to half (nearest even).  Fragment register i of k step kk: row hf = i % 2, columns
 * 16 kk + 8 (i / 2) + 2 t, + 1, i.e. accumulators 8 kk + 2 i, + 1. */
template <unsigned KS>
__device__ __forceinline__ void to_frags(uint32_t (&a)[KS][4], const float (&acc)[8 * KS], float f0, float f1) {
#pragma unroll
  for (unsigned kk = 0; kk < KS; kk++)
#pragma unroll
    for (unsigned i = 0; i < 4; i++) {
      const float f = (i & 1u) ? f1 : f0;
      a[kk][i] = f16x2_rn(acc[8 * kk + 2 * i] * f, acc[8 * kk + 2 * i + 1] * f);
    }
}

/* The mbarrier's arrival once this thread's cp.async copies so far have landed (noinc: the
 * barrier's count includes it). */
__device__ __forceinline__ void cp_arrive(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(sm90::smem_u32(bar)) : "memory");
}

/* A fragments times f[hf] a row (powers of two: exact unless they leave half's normal range) */
template <unsigned KS>
__device__ __forceinline__ void scale_frags(uint32_t (&a)[KS][4], float f0, float f1) {
#pragma unroll
  for (unsigned kk = 0; kk < KS; kk++)
#pragma unroll
    for (unsigned i = 0; i < 4; i++) {
      const float f = (i & 1u) ? f1 : f0;
      float x0, x1;
      asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}\n"
          : "=f"(x0), "=f"(x1)
          : "r"(a[kk][i]));
      a[kk][i] = f16x2_rn(x0 * f, x1 * f);
    }
}

/* The largest |value| of each of the thread's two rows, over the row's four lanes (NaN ignored,
 * as f16::amax). */
template <unsigned NA>
__device__ __forceinline__ void row_amax(const float (&acc)[NA], float &m0, float &m1) {
  /* four independent chains a row (a tree with a runtime stride went to local memory) */
  float a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (unsigned i = 0; i < NA / 4; i++) {
    a[i & 3u] = fmaxf(a[i & 3u], fmaxf(fabsf(acc[4 * i]), fabsf(acc[4 * i + 1])));
    b[i & 3u] = fmaxf(b[i & 3u], fmaxf(fabsf(acc[4 * i + 2]), fabsf(acc[4 * i + 3])));
  }
  m0 = fmaxf(fmaxf(a[0], a[1]), fmaxf(a[2], a[3]));
  m1 = fmaxf(fmaxf(b[0], b[1]), fmaxf(b[2], b[3]));
#pragma unroll
  for (unsigned x = 1; x < 4; x *= 2) {
    m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, x));
    m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, x));
  }
}

/* Each accumulator of row hf times f[hf]. */
template <unsigned NA> __device__ __forceinline__ void scale_rows(float (&acc)[NA], float f0, float f1) {
#pragma unroll
  for (unsigned i = 0; i < NA; i++) acc[i] *= (i & 2u) ? f1 : f0;
}

/* The thread's U^T (rows r0, r0 + 8 of the block; zero past dv) from U's rows in buffer ub. */
__device__ __forceinline__ void read_u(float (&u)[32], const unsigned char *ub, unsigned r0, unsigned t, bool ok0,
                                       bool ok1) {
  const float *x = reinterpret_cast<const float *>(ub + layout::U) + 2 * t * layout::LU + r0;
#pragma unroll
  for (unsigned j = 0; j < 8; j++)
#pragma unroll
    for (unsigned e = 0; e < 2; e++) {
      const float *y = x + (8 * j + e) * layout::LU;
      u[4 * j + e] = ok0 ? y[0] : 0.0f;
      u[4 * j + 2 + e] = ok1 ? y[8] : 0.0f;
    }
}

/* O^T (times 2^-e a row) as bf16 into o's tokens t0 .. t0 + L - 1: the warp's 16 columns go
 * through its staging [64 tokens, 16 columns] (stmatrix, transposed), then 16 bytes a store. */
__device__ __forceinline__ void store_o(const float (&oacc)[32], int e0, int e1, bf16 *o, const shape &p,
                                        unsigned h, unsigned c0, size_t t0, unsigned L, unsigned char *stage,
                                        const lane_ids &l) {
  const float f0 = f16::exp2i(-e0), f1 = f16::exp2i(-e1);
  const unsigned lane = l.tid & 31, i = lane >> 3, jj = lane & 7;
  const uint32_t st = sm90::smem_u32(stage);
  __syncwarp(); /* the last chunk's reads of the staging are done */
#pragma unroll
  for (unsigned j = 0; j < 8; j += 2) {
    /* matrices (tokens 8 j.., rows hf 0), (8 j.., hf 1), (8 j + 8.., hf 0), (8 j + 8.., hf 1) */
    const uint32_t r0 = bf16x2_rn(oacc[4 * j] * f0, oacc[4 * j + 1] * f0);
    const uint32_t r1 = bf16x2_rn(oacc[4 * j + 2] * f1, oacc[4 * j + 3] * f1);
    const uint32_t r2 = bf16x2_rn(oacc[4 * j + 4] * f0, oacc[4 * j + 5] * f0);
    const uint32_t r3 = bf16x2_rn(oacc[4 * j + 6] * f1, oacc[4 * j + 7] * f1);
    sm90::stmatrix_x4_trans(st + (8 * (j + (i >> 1)) + jj) * 32u + (i & 1u) * 16u, r0, r1, r2, r3);
  }
  __syncwarp();
  const unsigned col = c0 + 16 * l.w + 8 * (lane & 1u);
  if (col >= p.dv) return;
  bf16 *const dst = o + (size_t)h * p.dv + col;
  const size_t rs = (size_t)p.nv * p.dv;
  uint4 v[4]; /* all four reads, then the stores (a store each read waited for its read) */
#pragma unroll
  for (unsigned q = 0; q < 4; q++)
    v[q] = *reinterpret_cast<const uint4 *>(stage + ((lane >> 1) + 16 * q) * 32u + (lane & 1u) * 16u);
#pragma unroll
  for (unsigned q = 0; q < 4; q++) {
    const unsigned tok = (lane >> 1) + 16 * q;
    if (tok < L) *reinterpret_cast<uint4 *>(dst + (t0 + tok) * rs) = v[q];
  }
}
}  // namespace scan64

__device__ __forceinline__ void scan_chunks_rs(unsigned char *smem, bf16 *o, float *state, const int *cu,
                                               const int *slots, const float *wsf, const shape &p) {
  using Y = scan64::layout;
  using scan64::kNB;
  using scan64::RS128;
  using scan64::RS64;
  scan_part b;
  if (!scan_part_of<scan64::kBV>(b, state, cu, slots, p)) return;
  const unsigned h = b.h, c0 = b.c0;
  const lane_ids l = lanes();
  const unsigned lane = l.tid & 31;
  const unsigned nkb = (p.dk + 15) / 16; /* k steps over dk */
  const unsigned r0 = 16 * l.w + l.g;    /* the thread's rows: r0 and r0 + 8 */
  const bool ok0 = c0 + r0 < p.dv, ok1 = c0 + r0 + 8 < p.dv;
  const uint32_t s0 = sm90::smem_u32(smem);
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + Y::BAR), *empty = full + kNB;
  const size_t nch = chunks_of(b), ts = (size_t)b.ts, te = (size_t)b.te;
  const uint32_t *rec = first_record(b, cu, wsf, p);
  const size_t rstep = (size_t)p.nv * kRec; /* one chunk on in the workspace */
  /* Record r into buffer i: thread 0 its four planes by the bulk engine, every thread 8 of the
   * 16-byte pieces of U's block columns (64 rows of 256 bytes) by cp.async.  Y::COPIES arrivals
   * complete full[i]'s phase.  (Per-lane bulk copies of U's rows went one lane at a time.) */
  const auto fill = [&](unsigned i, const uint32_t *r) {
    unsigned char *d = smem + i * Y::BUF;
    if (l.tid == 0) {
      sm90::bulk_copy(d + Y::W, r + kRecW, Y::RP, &full[i]);
      sm90::bulk_copy(d + Y::Q, r + kRecQ, Y::RP, &full[i]);
      sm90::bulk_copy(d + Y::K, r + kRecK, Y::RP, &full[i]);
      sm90::bulk_copy(d + Y::M, r + kRecM, Y::RM, &full[i]);
    }
    const uint32_t du = sm90::smem_u32(d + Y::U);
    const uint32_t *ru = r + kRecU + c0;
#pragma unroll
    for (unsigned q = 0; q < 8; q++) {
      const unsigned c = l.tid + 128 * q, row = c / 16, col = c % 16;
      sm80::cp_async16(du + row * Y::LU * 4 + col * 16, ru + (size_t)row * kDv + 4 * col, 16);
    }
    scan64::cp_arrive(&full[i]);
  };
  if (l.tid == 0) {
    for (unsigned i = 0; i < kNB; i++) {
      sm90::mbar_init_count(&full[i], Y::COPIES);
      sm90::mbar_init_count(&empty[i], 4u); /* lane 0 of each warp */
    }
    sm90::mbar_init_fence();
  }
  __syncthreads(); /* the barriers are initialised */
  for (unsigned i = 0; i < kNB && i < nch; i++) fill(i, rec + i * rstep);

  /* S^T from the state [dk, dv] (the block's columns from Sg), zero past dk and dv */
  float sacc[64];
#pragma unroll
  for (unsigned j = 0; j < 16; j++)
#pragma unroll
    for (unsigned e = 0; e < 2; e++) {
      const unsigned k = 8 * j + 2 * l.t + e;
      const float *x = b.Sg + (size_t)k * p.dv + r0;
      sacc[4 * j + e] = b.Sg && k < p.dk && ok0 ? __ldg(x) : 0.0f;
      sacc[4 * j + 2 + e] = b.Sg && k < p.dk && ok1 ? __ldg(x + 8) : 0.0f;
    }
  /* the first chunk's U; the rows' exponents: S and that U as they are, then into range */
  float dacc[32];
  sm90::mbar_wait(&full[0], 0u);
  scan64::read_u(dacc, smem, r0, l.t, ok0, ok1);
  int e0, e1;
  {
    float a0, a1, u0, u1;
    scan64::row_amax(sacc, a0, a1);
    scan64::row_amax(dacc, u0, u1);
    e0 = f16::rescale_by(fmaxf(a0, u0), 0, 5);
    e1 = f16::rescale_by(fmaxf(a1, u1), 0, 5);
  }
  scan64::scale_rows(sacc, f16::exp2i(e0), f16::exp2i(e1));
  scan64::scale_rows(dacc, f16::exp2i(e0), f16::exp2i(e1));
  uint32_t s16[8][4], d16[4][4];
  scan64::to_frags(s16, sacc, 1.0f, 1.0f);
  float fs0 = 1.0f, fs1 = 1.0f; /* what sacc still owes the exponents (s16 has it) */
  int eo0 = 0, eo1 = 0;         /* the exponents of the O in oacc */
  float oacc[32];
  size_t to = 0; /* O's chunk: first token, tokens */
  unsigned lo = 0;
  const f16::pf_range pf = f16::prefetch_range(l.tid, b);
  float gL = __uint_as_float(__ldg(rec + kRecG));

  /* Chunk ci: dacc holds U times 2^e, s16 S times 2^e, sacc S times 2^e / fs; its record has landed. */
#pragma unroll 1
  for (size_t ci = 0; ci < nch; ci++) {
    const unsigned buf = (unsigned)(ci % kNB);
    const size_t t0 = ts + ci * kCh;
    const unsigned L = te - t0 < kCh ? (unsigned)(te - t0) : kCh;
    const bool more = ci + 1 < nch;
    const uint32_t *nrec = rec + rstep;
    const float gL_next = more ? __uint_as_float(__ldg(nrec + kRecG)) : 1.0f;
    if (pf.on && ci + 4 < nch) sm90::bulk_prefetch_l2(rec + 4 * rstep + pf.off, pf.bytes);
    const uint32_t bb = s0 + buf * Y::BUF;
    const uint64_t dW = sm90::desc_plain(bb + Y::W, 128, 256), dQ = sm90::desc_plain(bb + Y::Q, 128, 256);
    const uint64_t dK = sm90::desc_plain(bb + Y::K, 128, 256), dM = sm90::desc_plain(bb + Y::M, 128, 256);

    /* D^T = U^T + S^T (-W)^T */
    sm90::pin(dacc);
    sm90::wgmma_fence();
    if (nkb == kDk / 16) { /* dk = 128: one batch (a conditional MMA was a batch of its own) */
#pragma unroll
      for (unsigned kk = 0; kk < kDk / 16; kk++) RS64::run(dacc, s16[kk], dW + kk * scan64::kStep64);
    } else { /* the fragments stay in registers: no rolled loop */
#pragma unroll
      for (unsigned kk = 0; kk < kDk / 16; kk++)
        if (kk < nkb) RS64::run(dacc, s16[kk], dW + kk * scan64::kStep64);
    }
    sm90::wgmma_commit();
    /* while they run: S's decay (and what it owes the exponents), and the buffer before this one
     * refilled (every warp arrived on its empty barrier at the end of the last step) */
    scan64::scale_rows(sacc, gL * fs0, gL * fs1);
    fs0 = fs1 = 1.0f;
    if (ci > 0 && ci - 1 + kNB < nch) {
      const unsigned pb = (unsigned)((ci - 1) % kNB);
      sm90::mbar_wait(&empty[pb], (uint32_t)((ci - 1) / kNB) & 1u);
      fill(pb, rec + (kNB - 1) * rstep);
    }
    sm90::wgmma_wait0();
    sm90::pin(dacc);

    /* a D past 2^15 brings its row down (S's fragments with it: O takes them next) */
    {
      float m0, m1;
      scan64::row_amax(dacc, m0, m1);
      if (m0 >= 32768.0f || m1 >= 32768.0f) {
        const int d0 = m0 >= 32768.0f ? f16::rescale_by(m0, e0, 5) : 0;
        const int d1 = m1 >= 32768.0f ? f16::rescale_by(m1, e1, 5) : 0;
        const float f0 = f16::exp2i(d0), f1 = f16::exp2i(d1);
        e0 += d0, e1 += d1;
        scan64::scale_rows(dacc, f0, f1);
        scan64::scale_frags(s16, f0, f1); /* (sacc has the decay, which may be 0) */
        scan64::scale_rows(sacc, f0, f1);
      }
    }
    scan64::to_frags(d16, dacc, 1.0f, 1.0f);

    /* S^T = e^(G_L) S^T + D^T Kd; O^T = S^T Qs^T + D^T M^T (three groups) */
    sm90::pin(sacc);
    sm90::wgmma_fence();
#pragma unroll
    for (unsigned kk = 0; kk < kCh / 16; kk++) RS128::run(sacc, d16[kk], dK + kk * scan64::kStep128);
    sm90::wgmma_commit();
    /* the last chunk's O out while the state's MMAs run, staged in this buffer's U bytes: every
     * warp read its U before it issued this chunk's first MMAs, which are done */
    if (ci > 0) scan64::store_o(oacc, eo0, eo1, o, p, h, c0, to, lo, smem + buf * Y::BUF + Y::U + l.w * Y::OW, l);
    sm90::wgmma_fence(); /* oacc was read */
    eo0 = e0, eo1 = e1;
    RS64::run_set(oacc, s16[0], dQ);
    if (nkb == kDk / 16) {
#pragma unroll
      for (unsigned kk = 1; kk < kDk / 16; kk++) RS64::run(oacc, s16[kk], dQ + kk * scan64::kStep64);
    } else {
#pragma unroll
      for (unsigned kk = 1; kk < kDk / 16; kk++)
        if (kk < nkb) RS64::run(oacc, s16[kk], dQ + kk * scan64::kStep64);
    }
    sm90::wgmma_commit();
#pragma unroll
    for (unsigned kk = 0; kk < kCh / 16; kk++) RS64::run(oacc, d16[kk], dM + kk * scan64::kStep64);
    sm90::wgmma_commit();
    to = t0, lo = L;
    /* while the state's MMAs run: the next chunk's U (unscaled until its exponent is known) */
    if (more) {
      sm90::mbar_wait(&full[(unsigned)((ci + 1) % kNB)], (uint32_t)((ci + 1) / kNB) & 1u);
      scan64::read_u(dacc, smem + (unsigned)((ci + 1) % kNB) * Y::BUF, r0, l.t, ok0, ok1);
    }
    /* S into range for the next chunk (none after the last: the state is stored at e) */
    sm90::wgmma_wait<2>(); /* the state's group */
    sm90::pin(sacc);
    {
      float m0, m1;
      scan64::row_amax(sacc, m0, m1);
      const int d0 = more ? f16::rescale_by(m0, e0, 5) : 0, d1 = more ? f16::rescale_by(m1, e1, 5) : 0;
      fs0 = f16::exp2i(d0), fs1 = f16::exp2i(d1);
      e0 += d0, e1 += d1;
    }
    scan64::scale_rows(dacc, f16::exp2i(e0), f16::exp2i(e1));
    sm90::wgmma_wait<1>(); /* Qs's group: s16 is free */
    sm90::pin(s16);
    if (__all_sync(0xffffffffu, fs0 == 1.0f && fs1 == 1.0f))
      scan64::to_frags(s16, sacc, 1.0f, 1.0f);
    else
      scan64::to_frags(s16, sacc, fs0, fs1);
    /* M's group too: an MMA group left in flight into the next step made ptxas serialise every
     * wgmma of the kernel (C7514); the next step's MMAs would queue behind it anyway */
    sm90::wgmma_wait0();
    sm90::pin(oacc);
    sm90::pin(d16);
    __syncwarp(); /* the warp's reads of the buffer (U, O's staging) before its arrival */
    if (lane == 0) sm90::mbar_arrive(&empty[buf]); /* this warp is done with the buffer */
    gL = gL_next;
    rec = nrec;
  }
  if (nch > 0)
    scan64::store_o(oacc, eo0, eo1, o, p, h, c0, to, lo,
                    smem + (unsigned)((nch - 1) % kNB) * Y::BUF + Y::U + l.w * Y::OW, l);

  if (b.Sg) {
    const float f0 = f16::exp2i(-e0), f1 = f16::exp2i(-e1);
#pragma unroll
    for (unsigned j = 0; j < 16; j++)
#pragma unroll
      for (unsigned e = 0; e < 2; e++) {
        const unsigned k = 8 * j + 2 * l.t + e;
        float *x = b.Sg + (size_t)k * p.dv + r0;
        if (k < p.dk && ok0) x[0] = sacc[4 * j + e] * f0;
        if (k < p.dk && ok1) x[8] = sacc[4 * j + 2 + e] * f1;
      }
  }
}
