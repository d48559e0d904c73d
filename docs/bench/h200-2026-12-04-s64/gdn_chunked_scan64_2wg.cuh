/* Phase 1 of delta_rule_prefill_chunked_f16 with the state in registers, sm_90a
 * (kernels.def delta_rule_prefill_chunked_f16_scan64).  Included by gdn_chunked.cu inside its
 * anonymous namespace and sm_90a guard, after gdn_chunked_wg16.cuh.
 *
 * The block owns 64 value columns of a head and keeps its slice of the state transposed,
 * S^T [64 columns, dk], as the accumulators of an m64n128 wgmma.  The chunk step of
 * gdn_chunked_wg16.cuh, transposed:
 *   D^T [64, 64 tokens] = U^T + S^T (-W)^T        k over dk
 *   S^T [64, dk]        = e^(G_L) S^T + D^T Kd     k over the chunk's tokens
 *   O^T [64, 64 tokens] = S^T Qs^T + D^T M^T       k over dk, then over the tokens
 * Two warpgroups.  Warpgroup 0 runs the recurrence (D and S): S^T and D^T are A operands taken
 * from registers (an m64nN accumulator rounded to fp16 pair by pair is the A fragment of N / 16 k
 * steps), and the record's planes are the B operands as phase 0 wrote them (a K-major m64 x k16
 * block of A tiles is a K-major n64 x k16 block of B; Kd^T's n128 likewise).  Each step it also
 * puts the step's S and D (fp16) into two planes of shared memory for warpgroup 1, which makes O
 * from them and stores it, off the recurrence's chain.  The bulk engine copies the record's planes
 * three chunks ahead into a ring of three buffers; warpgroup 0 loads U (f32) a chunk ahead into
 * registers.
 *
 * Range: as in gdn_chunked_wg16.cuh the accumulators hold S, U, D and O times a power of two,
 * here one a value column (a row of S^T, whose four lanes agree on it); S's largest |value| of the
 * row is brought into [2^5, 2^6) before each step, and a D past 2^15 brings its row down within
 * the step.  The exponents go to warpgroup 1 with the planes.
 *
 * Lanes (in either warpgroup): warp w, lane g = lane / 4, t = lane % 4 holds rows (value columns
 * of the block) 16 w + g (hf 0) and 16 w + g + 8 (hf 1); accumulator index 4 j + 2 hf + e is
 * column 8 j + 2 t + e (k for S^T, the chunk's token for D^T and O^T). */

namespace scan64 {
constexpr unsigned kBV = 64; /* value columns a block: the MMAs' m */
constexpr unsigned kNB = 3;  /* records in shared memory: one in use, two arriving */
struct layout {              /* bytes of dynamic shared memory */
  static constexpr unsigned RP = f16::layout::RP, RM = f16::layout::RM;
  /* a buffer: the record's four planes */
  static constexpr unsigned W = 0, Q = RP, K = 2 * RP, M = 3 * RP, BUF = 3 * RP + RM;
  /* then S [64 columns, 128 k] and D [64 columns, 64 tokens] as fp16 A tiles (the record's tile
   * layout), the columns' exponents (int [64]), warpgroup 1's O staging (a warp's [64 tokens, 16
   * columns] bf16), and the barriers: full[kNB], empty[kNB], ready, freep */
  static constexpr unsigned SP = kNB * BUF, DP = SP + RP, EO = DP + RM, OW = kCh * 32, OS = EO + 64 * 4;
  static constexpr unsigned BAR = OS + 4 * OW, end = BAR + (2 * kNB + 2) * 8;
};
static_assert(layout::BUF % 1024u == 0 && layout::SP % 1024u == 0 && layout::BAR % 8u == 0, "aligned buffers");
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

/* U^T of record rec (U f32 [64 tokens, 128 columns]): the thread's rows, zero past dv. */
__device__ __forceinline__ void load_u(float (&u)[32], const uint32_t *rec, unsigned c0, unsigned r0, unsigned t,
                                       bool ok0, bool ok1) {
  const float *U = reinterpret_cast<const float *>(rec + kRecU) + c0 + r0 + (size_t)2 * t * kDv;
#pragma unroll
  for (unsigned j = 0; j < 8; j++)
#pragma unroll
    for (unsigned e = 0; e < 2; e++) {
      const float *x = U + (8 * j + e) * kDv;
      u[4 * j + e] = ok0 ? __ldg(x) : 0.0f;
      u[4 * j + 2 + e] = ok1 ? __ldg(x + 8) : 0.0f;
    }
}

/* The thread's A fragments (KS k steps, warp w's 16 rows) into an fp16 plane of the record's tile
 * layout with four row tiles (a k step 2 KiB on): fragment register i is the core matrix of rows
 * 8 (i % 2).., columns 8 (i / 2)..: 256 (i % 2) + 128 (i / 2) bytes into the tile. */
template <unsigned KS>
__device__ __forceinline__ void put_frags(uint32_t plane, const uint32_t (&a)[KS][4], unsigned w, unsigned lane) {
  const unsigned i = lane >> 3, j = lane & 7u;
  const uint32_t at = plane + w * 512u + (i & 1u) * 256u + (i >> 1) * 128u + j * 16u;
#pragma unroll
  for (unsigned kk = 0; kk < KS; kk++) sm90::stmatrix_x4(at + kk * 2048u, a[kk][0], a[kk][1], a[kk][2], a[kk][3]);
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
  using SS64 = sm90::wgmma_ss_f16<64>;
  scan_part b;
  if (!scan_part_of<scan64::kBV>(b, state, cu, slots, p)) return;
  const unsigned h = b.h, c0 = b.c0;
  lane_ids l = lanes();
  const unsigned wg = l.tid >> 7; /* 0: the recurrence; 1: O */
  l.tid &= 127u, l.w &= 3u;       /* lanes within the warpgroup */
  const unsigned lane = l.tid & 31;
  const unsigned nkb = (p.dk + 15) / 16; /* k steps over dk */
  const unsigned r0 = 16 * l.w + l.g;    /* the thread's rows: r0 and r0 + 8 */
  const bool ok0 = c0 + r0 < p.dv, ok1 = c0 + r0 + 8 < p.dv;
  const uint32_t s0 = sm90::smem_u32(smem);
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + Y::BAR), *empty = full + kNB, *ready = empty + kNB,
           *freep = ready + 1;
  int *eo = reinterpret_cast<int *>(smem + Y::EO);
  const size_t nch = chunks_of(b), ts = (size_t)b.ts, te = (size_t)b.te;
  const uint32_t *rec = first_record(b, cu, wsf, p);
  const size_t rstep = (size_t)p.nv * kRec; /* one chunk on in the workspace */
  /* record r's four planes into buffer i (thread 0 of warpgroup 0) */
  const auto fill = [&](unsigned i, const uint32_t *r) {
    unsigned char *d = smem + i * Y::BUF;
    sm90::bulk_copy(d + Y::W, r + kRecW, Y::RP, &full[i]);
    sm90::bulk_copy(d + Y::Q, r + kRecQ, Y::RP, &full[i]);
    sm90::bulk_copy(d + Y::K, r + kRecK, Y::RP, &full[i]);
    sm90::bulk_copy(d + Y::M, r + kRecM, Y::RM, &full[i]);
  };
  if (wg == 0 && l.tid == 0) {
    for (unsigned i = 0; i < kNB; i++) {
      sm90::mbar_init_count(&full[i], 4u);  /* the four copies */
      sm90::mbar_init_count(&empty[i], 8u); /* lane 0 of each warp of both warpgroups */
    }
    sm90::mbar_init_count(ready, 128u); /* warpgroup 0's threads, the planes written */
    sm90::mbar_init_count(freep, 4u);   /* warpgroup 1's warps, their MMAs done */
    sm90::mbar_init_fence();
    for (unsigned i = 0; i < kNB && i < nch; i++) fill(i, rec + i * rstep);
  }
  __syncthreads(); /* the barriers are initialised */

  if (wg == 1) { /* O^T = S^T Qs^T + D^T M^T from the planes warpgroup 0 puts, a chunk at a time */
    const uint64_t dS = sm90::desc_plain(s0 + Y::SP, 128, 256), dD = sm90::desc_plain(s0 + Y::DP, 128, 256);
    unsigned char *stage = smem + Y::OS + l.w * Y::OW;
#pragma unroll 1
    for (size_t ci = 0; ci < nch; ci++) {
      const unsigned buf = (unsigned)(ci % kNB);
      const size_t t0 = ts + ci * kCh;
      const unsigned L = te - t0 < kCh ? (unsigned)(te - t0) : kCh;
      sm90::mbar_wait(ready, (uint32_t)ci & 1u);
      sm90::mbar_wait(&full[buf], (uint32_t)(ci / kNB) & 1u);
      const int e0 = eo[r0], e1 = eo[r0 + 8];
      const uint32_t bb = s0 + buf * Y::BUF;
      const uint64_t dQ = sm90::desc_plain(bb + Y::Q, 128, 256), dM = sm90::desc_plain(bb + Y::M, 128, 256);
      float oacc[32];
#pragma unroll
      for (unsigned i = 0; i < 32; i++) oacc[i] = 0.0f;
      sm90::pin(oacc);
      sm90::wgmma_fence();
      if (nkb == kDk / 16) {
#pragma unroll
        for (unsigned kk = 0; kk < kDk / 16; kk++)
          SS64::run(oacc, dS + kk * scan64::kStep64, dQ + kk * scan64::kStep64);
      } else {
#pragma unroll
        for (unsigned kk = 0; kk < kDk / 16; kk++)
          if (kk < nkb) SS64::run(oacc, dS + kk * scan64::kStep64, dQ + kk * scan64::kStep64);
      }
#pragma unroll
      for (unsigned kk = 0; kk < kCh / 16; kk++)
        SS64::run(oacc, dD + kk * scan64::kStep64, dM + kk * scan64::kStep64);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(oacc);
      __syncwarp();
      if (lane == 0) {
        sm90::mbar_arrive(freep);       /* the planes may take the next chunk's S and D */
        sm90::mbar_arrive(&empty[buf]); /* this warp is done with Qs and M */
      }
      scan64::store_o(oacc, e0, e1, o, p, h, c0, t0, L, stage, l);
    }
    return;
  }

  /* warpgroup 0: S^T from the state [dk, dv] (the block's columns from Sg), zero past dk and dv */
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
  float dacc[32], un[32];
  scan64::load_u(dacc, rec, c0, r0, l.t, ok0, ok1);
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
  const f16::pf_range pf = f16::prefetch_range(l.tid, b);
  float gL = __uint_as_float(__ldg(rec + kRecG));

  /* Chunk ci: dacc holds U times 2^e, s16 S times 2^e, sacc S times 2^e / fs. */
#pragma unroll 1
  for (size_t ci = 0; ci < nch; ci++) {
    const unsigned buf = (unsigned)(ci % kNB);
    const bool more = ci + 1 < nch;
    const uint32_t *nrec = rec + rstep;
    const float gL_next = more ? __uint_as_float(__ldg(nrec + kRecG)) : 1.0f;
    if (more) scan64::load_u(un, nrec, c0, r0, l.t, ok0, ok1); /* in flight through the step */
    if (pf.on && ci + 4 < nch) sm90::bulk_prefetch_l2(rec + 4 * rstep + pf.off, pf.bytes);
    const uint32_t bb = s0 + buf * Y::BUF;
    const uint64_t dW = sm90::desc_plain(bb + Y::W, 128, 256), dK = sm90::desc_plain(bb + Y::K, 128, 256);

    /* D^T = U^T + S^T (-W)^T */
    sm90::mbar_wait(&full[buf], (uint32_t)(ci / kNB) & 1u);
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
    /* while they run: S's decay (and what it owes the exponents), and the buffer of the chunk
     * before this one refilled once both warpgroups are done with it */
    scan64::scale_rows(sacc, gL * fs0, gL * fs1);
    fs0 = fs1 = 1.0f;
    if (l.tid == 0 && ci > 0 && ci - 1 + kNB < nch) {
      const unsigned pb = (unsigned)((ci - 1) % kNB);
      sm90::mbar_wait(&empty[pb], (uint32_t)((ci - 1) / kNB) & 1u);
      fill(pb, rec + (kNB - 1) * rstep);
    }
    sm90::wgmma_wait0();
    sm90::pin(dacc);

    /* a D past 2^15 brings its row down (S's fragments with it: O takes them) */
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
    /* S, D and the exponents to warpgroup 1 (once it is done with the last chunk's) */
    if (ci > 0) sm90::mbar_wait(freep, (uint32_t)(ci - 1) & 1u);
    scan64::put_frags(s0 + Y::SP, s16, l.w, lane);
    scan64::put_frags(s0 + Y::DP, d16, l.w, lane);
    if (l.t == 0) eo[r0] = e0, eo[r0 + 8] = e1;
    sm90::fence_proxy_async(); /* the planes are read by MMAs */
    sm90::mbar_arrive(ready);

    /* S^T = e^(G_L) S^T + D^T Kd */
    sm90::pin(sacc);
    sm90::wgmma_fence();
#pragma unroll
    for (unsigned kk = 0; kk < kCh / 16; kk++) RS128::run(sacc, d16[kk], dK + kk * scan64::kStep128);
    sm90::wgmma_commit();
    sm90::wgmma_wait0();
    sm90::pin(sacc);
    sm90::pin(d16);
    /* S into range for the next chunk (none after the last: the state is stored at e) */
    {
      float m0, m1;
      scan64::row_amax(sacc, m0, m1);
      const int d0 = more ? f16::rescale_by(m0, e0, 5) : 0, d1 = more ? f16::rescale_by(m1, e1, 5) : 0;
      fs0 = f16::exp2i(d0), fs1 = f16::exp2i(d1);
      e0 += d0, e1 += d1;
    }
    __syncwarp();
    if (lane == 0) sm90::mbar_arrive(&empty[buf]); /* this warp is done with -W and Kd^T */
    if (more) {
      const float f0 = f16::exp2i(e0), f1 = f16::exp2i(e1);
#pragma unroll
      for (unsigned i = 0; i < 32; i++) dacc[i] = un[i] * ((i & 2u) ? f1 : f0);
    }
    if (__all_sync(0xffffffffu, fs0 == 1.0f && fs1 == 1.0f))
      scan64::to_frags(s16, sacc, 1.0f, 1.0f);
    else
      scan64::to_frags(s16, sacc, fs0, fs1);
    gL = gL_next;
    rec = nrec;
  }

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
