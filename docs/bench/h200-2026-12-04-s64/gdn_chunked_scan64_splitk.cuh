/* Phase 1 of delta_rule_prefill_chunked_f16 with the state in registers, sm_90a
 * (kernels.def delta_rule_prefill_chunked_f16_scan64).  Included by gdn_chunked.cu inside its
 * anonymous namespace and sm_90a guard, after gdn_chunked_wg16.cuh.
 *
 * The block owns 64 value columns of a head and keeps its slice of the state transposed,
 * S^T [64 columns, dk], as wgmma accumulators: warpgroup h holds k in [64 h, 64 h + 64).  The
 * chunk step of gdn_chunked_wg16.cuh, transposed and split over k:
 *   P_h   [64, 64 tokens] = S_h^T (-W_h)^T (+ U^T in warpgroup 0)   k over its half of dk
 *   D^T                   = P_0 + P_1 (exchanged through shared memory, one barrier)
 *   S_h^T [64, 64]        = e^(G_L) S_h^T + D^T Kd_h                 k over the chunk's tokens
 *   O^T   [64, 64 tokens] = S_0^T Qs_0^T + S_1^T Qs_1^T + D^T M^T     (warpgroup 1's part sent
 *                                                                     with the next exchange)
 * S_h^T and D^T are A operands taken from registers (an m64nN accumulator rounded to fp16 pair
 * by pair is the A fragment of N / 16 k steps); the record's planes are the B operands as phase 0
 * wrote them (a K-major m64 x k16 block of A tiles is a K-major n64 x k16 block of B).  The bulk
 * engine copies the planes three chunks ahead into a ring of three buffers; warpgroup 0 loads U
 * (f32) a chunk ahead into registers.
 *
 * Range: as in gdn_chunked_wg16.cuh the accumulators hold S, U, D and O times a power of two, here
 * one a value column and warpgroup (a row of S_h^T, whose four lanes agree on it): S's largest
 * |value| of the row is brought into [2^5, 2^6) before each step, and a D past 2^15 brings its row
 * down within the step.  Partial sums cross warpgroups with their exponents.
 *
 * Lanes (in either warpgroup): warp w, lane g = lane / 4, t = lane % 4 holds rows (value columns
 * of the block) 16 w + g (hf 0) and 16 w + g + 8 (hf 1); accumulator index 4 j + 2 hf + e is
 * column 8 j + 2 t + e (k - 64 h for S_h^T, the chunk's token for D^T and O^T).  Thread tid of
 * one warpgroup and thread tid of the other hold the same rows and columns of D^T and O^T, so the
 * exchange area is [value i][thread] words, each thread reading its partner's. */

namespace scan64 {
constexpr unsigned kBV = 64; /* value columns a block: the MMAs' m */
constexpr unsigned kNB = 3;  /* records in shared memory: one in use, two arriving */
struct layout {              /* bytes of dynamic shared memory */
  static constexpr unsigned RP = f16::layout::RP, RM = f16::layout::RM;
  /* a buffer: the record's four planes */
  static constexpr unsigned W = 0, Q = RP, K = 2 * RP, M = 3 * RP, BUF = 3 * RP + RM;
  /* the exchange, [32 values][128 threads] words each: X0 warpgroup 0's partial D and exponents,
   * X1 warpgroup 1's, then its O part and O's exponents (whose bytes stage warpgroup 0's O, each
   * warp in its own threads' words); then full[kNB], empty[kNB] */
  static constexpr unsigned XV = 32 * 128 * 4, XE = 2 * 128 * 4;
  static constexpr unsigned X0 = kNB * BUF, X0E = X0 + XV, X1 = X0E + XE, X1E = X1 + XV, X1O = X1E + XE,
                            X1OE = X1O + XV;
  static constexpr unsigned BAR = X1OE + XE, end = BAR + 2 * kNB * 8;
};
static_assert(layout::BUF % 1024u == 0 && layout::X0 % 1024u == 0 && layout::BAR % 8u == 0, "aligned buffers");
/* named barriers (0 is __syncthreads): the exchange; each warpgroup's reads done before the
 * other writes again */
constexpr unsigned kBarX = 1, kBarRead0 = 2, kBarRead1 = 3;
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

/* O^T as bf16 into o's tokens t0 .. t0 + L - 1: the warp's 16 columns go through staging
 * (stmatrix, transposed: token r's 32 bytes at st + (r / 4) 512 + (r % 4) 32, i.e. within this
 * warp's threads' words of an exchange array), then 16 bytes a store. */
__device__ __forceinline__ void store_o(const float (&oacc)[32], bf16 *o, const shape &p, unsigned h, unsigned c0,
                                        size_t t0, unsigned L, unsigned char *stage, const lane_ids &l) {
  const unsigned lane = l.tid & 31, i = lane >> 3, jj = lane & 7;
  const uint32_t st = sm90::smem_u32(stage);
  const auto at = [](unsigned r, unsigned hf) { return (r >> 2) * 512u + (r & 3u) * 32u + hf * 16u; };
  __syncwarp(); /* every lane of the warp has read its words */
#pragma unroll
  for (unsigned j = 0; j < 8; j += 2) {
    /* matrices (tokens 8 j.., rows hf 0), (8 j.., hf 1), (8 j + 8.., hf 0), (8 j + 8.., hf 1) */
    const uint32_t r0 = bf16x2_rn(oacc[4 * j], oacc[4 * j + 1]);
    const uint32_t r1 = bf16x2_rn(oacc[4 * j + 2], oacc[4 * j + 3]);
    const uint32_t r2 = bf16x2_rn(oacc[4 * j + 4], oacc[4 * j + 5]);
    const uint32_t r3 = bf16x2_rn(oacc[4 * j + 6], oacc[4 * j + 7]);
    sm90::stmatrix_x4_trans(st + at(8 * (j + (i >> 1)) + jj, i & 1u), r0, r1, r2, r3);
  }
  __syncwarp();
  uint4 v[4]; /* all four reads, then the stores (a store each read waited for its read) */
#pragma unroll
  for (unsigned q = 0; q < 4; q++)
    v[q] = *reinterpret_cast<const uint4 *>(stage + at((lane >> 1) + 16 * q, lane & 1u));
  __syncwarp(); /* the staging's reads before anything writes these words again */
  const unsigned col = c0 + 16 * l.w + 8 * (lane & 1u);
  if (col >= p.dv) return;
  bf16 *const dst = o + (size_t)h * p.dv + col;
  const size_t rs = (size_t)p.nv * p.dv;
#pragma unroll
  for (unsigned q = 0; q < 4; q++) {
    const unsigned tok = (lane >> 1) + 16 * q;
    if (tok < L) *reinterpret_cast<uint4 *>(dst + (t0 + tok) * rs) = v[q];
  }
}

/* Named barriers among the block's warpgroups (count: threads arriving in all) */
__device__ __forceinline__ void bar_sync(unsigned id, unsigned count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned id, unsigned count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
/* 32 values and two exponents of this thread into / out of an exchange array ([i][128] words) */
__device__ __forceinline__ void put_x(unsigned char *x, unsigned char *xe, const float (&v)[32], int e0, int e1,
                                      unsigned tid) {
  float *f = reinterpret_cast<float *>(x) + tid;
#pragma unroll
  for (unsigned i = 0; i < 32; i++) f[i * 128u] = v[i];
  int *e = reinterpret_cast<int *>(xe) + tid;
  e[0] = e0, e[128] = e1;
}
__device__ __forceinline__ void get_x(const unsigned char *x, const unsigned char *xe, float (&v)[32], int &e0,
                                      int &e1, unsigned tid) {
  const float *f = reinterpret_cast<const float *>(x) + tid;
#pragma unroll
  for (unsigned i = 0; i < 32; i++) v[i] = f[i * 128u];
  const int *e = reinterpret_cast<const int *>(xe) + tid;
  e0 = e[0], e1 = e[128];
}
}  // namespace scan64

__device__ __forceinline__ void scan_chunks_rs(unsigned char *smem, bf16 *o, float *state, const int *cu,
                                               const int *slots, const float *wsf, const shape &p) {
  using Y = scan64::layout;
  using scan64::kNB;
  using scan64::RS64;
  scan_part b;
  if (!scan_part_of<scan64::kBV>(b, state, cu, slots, p)) return;
  const unsigned h = b.h, c0 = b.c0;
  lane_ids l = lanes();
  const unsigned wg = l.tid >> 7; /* k in [64 wg, 64 wg + 64) */
  l.tid &= 127u, l.w &= 3u;       /* lanes within the warpgroup */
  const unsigned lane = l.tid & 31, k0 = 64 * wg;
  const unsigned nkb = p.dk <= k0 ? 0u : p.dk - k0 >= 64 ? 4u : (p.dk - k0 + 15) / 16; /* its k steps */
  const unsigned r0 = 16 * l.w + l.g; /* the thread's rows: r0 and r0 + 8 */
  const bool ok0 = c0 + r0 < p.dv, ok1 = c0 + r0 + 8 < p.dv;
  const uint32_t s0 = sm90::smem_u32(smem);
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + Y::BAR), *empty = full + kNB;
  unsigned char *const xm = smem + (wg ? Y::X1 : Y::X0), *const xme = smem + (wg ? Y::X1E : Y::X0E);
  const unsigned char *const xo = smem + (wg ? Y::X0 : Y::X1), *const xoe = smem + (wg ? Y::X0E : Y::X1E);
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
  const bool t0w0 = wg == 0 && l.tid == 0;
  if (t0w0) {
    for (unsigned i = 0; i < kNB; i++) {
      sm90::mbar_init_count(&full[i], 4u);  /* the four copies */
      sm90::mbar_init_count(&empty[i], 8u); /* lane 0 of each warp of both warpgroups */
    }
    sm90::mbar_init_fence();
    for (unsigned i = 0; i < kNB && i < nch; i++) fill(i, rec + i * rstep);
  }
  __syncthreads(); /* the barriers are initialised */

  /* S_wg^T from the state [dk, dv] (the block's columns from Sg), zero past dk and dv */
  float sacc[32];
#pragma unroll
  for (unsigned j = 0; j < 8; j++)
#pragma unroll
    for (unsigned e = 0; e < 2; e++) {
      const unsigned k = k0 + 8 * j + 2 * l.t + e;
      const float *x = b.Sg + (size_t)k * p.dv + r0;
      sacc[4 * j + e] = b.Sg && k < p.dk && ok0 ? __ldg(x) : 0.0f;
      sacc[4 * j + 2 + e] = b.Sg && k < p.dk && ok1 ? __ldg(x + 8) : 0.0f;
    }
  /* warpgroup 0: the first chunk's U; the rows' exponents: S and that U as they are, then into range */
  float dacc[32], un[32], oacc[32];
#pragma unroll
  for (unsigned i = 0; i < 32; i++) dacc[i] = 0.0f, oacc[i] = 0.0f;
  if (wg == 0) scan64::load_u(dacc, rec, c0, r0, l.t, ok0, ok1);
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
  uint32_t s16[4][4], d16[4][4];
  scan64::to_frags(s16, sacc, 1.0f, 1.0f);
  float fs0 = 1.0f, fs1 = 1.0f; /* what sacc still owes the exponents (s16 has it) */
  int eo0 = 0, eo1 = 0;         /* the exponents of the O in oacc */
  size_t to = 0;                /* O's chunk: first token, tokens */
  unsigned lo = 0;
  f16::pf_range pf = f16::prefetch_range(l.tid, b);
  pf.on = pf.on && wg == 0;
  float gL = __uint_as_float(__ldg(rec + kRecG));
  /* 2^(mine - other), the factor that brings the other warpgroup's values to this one's scale */
  const auto cross = [](int mine, int other) {
    const int d = mine - other;
    return d < -126 ? 0.0f : f16::exp2i(d > 126 ? 126 : d);
  };

  /* Chunk ci: dacc holds U times 2^e (warpgroup 0; zero in 1), s16 S_wg times 2^e, sacc S_wg
   * times 2^e / fs, oacc the last chunk's O part at exponents eo. */
#pragma unroll 1
  for (size_t ci = 0; ci < nch; ci++) {
    const unsigned buf = (unsigned)(ci % kNB);
    const size_t t0 = ts + ci * kCh;
    const unsigned L = te - t0 < kCh ? (unsigned)(te - t0) : kCh;
    const bool more = ci + 1 < nch;
    const uint32_t *nrec = rec + rstep;
    const float gL_next = more ? __uint_as_float(__ldg(nrec + kRecG)) : 1.0f;
    if (wg == 0 && more) scan64::load_u(un, nrec, c0, r0, l.t, ok0, ok1); /* in flight through the step */
    if (pf.on && ci + 4 < nch) sm90::bulk_prefetch_l2(rec + 4 * rstep + pf.off, pf.bytes);
    const uint32_t bb = s0 + buf * Y::BUF;
    /* this warpgroup's k: -W's and Qs' k tiles 4 wg.., Kd^T's row tiles 4 wg.. */
    const uint64_t dW = sm90::desc_plain(bb + Y::W + wg * 4 * kTileBlock, 128, 256);
    const uint64_t dQ = sm90::desc_plain(bb + Y::Q + wg * 4 * kTileBlock, 128, 256);
    const uint64_t dK = sm90::desc_plain(bb + Y::K + wg * kTileBlock, 128, 256);
    const uint64_t dM = sm90::desc_plain(bb + Y::M, 128, 256);

    /* P_wg = (U^T +) S_wg^T (-W_wg)^T */
    sm90::mbar_wait(&full[buf], (uint32_t)(ci / kNB) & 1u);
    sm90::pin(dacc);
    sm90::wgmma_fence();
    if (nkb == 4) { /* one batch (a conditional MMA was a batch of its own) */
#pragma unroll
      for (unsigned kk = 0; kk < 4; kk++) RS64::run(dacc, s16[kk], dW + kk * scan64::kStep64);
    } else { /* the fragments stay in registers: no rolled loop */
#pragma unroll
      for (unsigned kk = 0; kk < 4; kk++)
        if (kk < nkb) RS64::run(dacc, s16[kk], dW + kk * scan64::kStep64);
    }
    sm90::wgmma_commit();
    /* while they run: S's decay (and what it owes the exponents); the buffer of the chunk before
     * this one refilled once both warpgroups are done with it */
    scan64::scale_rows(sacc, gL * fs0, gL * fs1);
    fs0 = fs1 = 1.0f;
    if (t0w0 && ci > 0 && ci - 1 + kNB < nch) {
      const unsigned pb = (unsigned)((ci - 1) % kNB);
      sm90::mbar_wait(&empty[pb], (uint32_t)((ci - 1) / kNB) & 1u);
      fill(pb, rec + (kNB - 1) * rstep);
    }
    sm90::wgmma_wait0();
    sm90::pin(dacc);

    /* D^T = P_0 + P_1: each half through the exchange, the other's added at this one's scale.
     * Warpgroup 1 sends the last chunk's O part with it. */
    if (ci > 0) scan64::bar_sync(wg ? scan64::kBarRead1 : scan64::kBarRead0, 256); /* read by the other */
    scan64::put_x(xm, xme, dacc, e0, e1, l.tid);
    if (wg == 1 && ci > 0) scan64::put_x(smem + Y::X1O, smem + Y::X1OE, oacc, eo0, eo1, l.tid);
    scan64::bar_sync(scan64::kBarX, 256);
    {
      int x0, x1;
      const int *xe = reinterpret_cast<const int *>(xoe) + l.tid;
      x0 = xe[0], x1 = xe[128];
      const float f0 = cross(e0, x0), f1 = cross(e1, x1);
      const float *xv = reinterpret_cast<const float *>(xo) + l.tid;
#pragma unroll
      for (unsigned i = 0; i < 32; i++) dacc[i] = fmaf(xv[i * 128u], (i & 2u) ? f1 : f0, dacc[i]);
    }
    if (wg == 1) {
      scan64::bar_arrive(scan64::kBarRead0, 256);
    } else {
      if (ci > 0) { /* the last chunk's O: this part and warpgroup 1's, each at its exponents */
        const int *xe = reinterpret_cast<const int *>(smem + Y::X1OE) + l.tid;
        const int y0 = xe[0], y1 = xe[128];
        const float *xv = reinterpret_cast<const float *>(smem + Y::X1O) + l.tid;
        const float g0 = f16::exp2i(-eo0), g1 = f16::exp2i(-eo1), h0 = f16::exp2i(-y0), h1 = f16::exp2i(-y1);
#pragma unroll
        for (unsigned i = 0; i < 32; i++)
          oacc[i] = fmaf(xv[i * 128u], (i & 2u) ? h1 : h0, oacc[i] * ((i & 2u) ? g1 : g0));
        scan64::store_o(oacc, o, p, h, c0, to, lo, smem + Y::X1O + l.w * 128u, l);
      }
      scan64::bar_arrive(scan64::kBarRead1, 256);
    }

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
    eo0 = e0, eo1 = e1;

    /* S_wg^T = e^(G_L) S_wg^T + D^T Kd_wg; O part: S_wg^T Qs_wg^T (+ D^T M^T in warpgroup 0) */
#pragma unroll
    for (unsigned i = 0; i < 32; i++) oacc[i] = 0.0f;
    sm90::pin(sacc);
    sm90::pin(oacc);
    sm90::wgmma_fence();
#pragma unroll
    for (unsigned kk = 0; kk < kCh / 16; kk++) RS64::run(sacc, d16[kk], dK + kk * scan64::kStep128);
    sm90::wgmma_commit();
    if (nkb == 4) {
#pragma unroll
      for (unsigned kk = 0; kk < 4; kk++) RS64::run(oacc, s16[kk], dQ + kk * scan64::kStep64);
    } else {
#pragma unroll
      for (unsigned kk = 0; kk < 4; kk++)
        if (kk < nkb) RS64::run(oacc, s16[kk], dQ + kk * scan64::kStep64);
    }
    if (wg == 0) {
#pragma unroll
      for (unsigned kk = 0; kk < kCh / 16; kk++) RS64::run(oacc, d16[kk], dM + kk * scan64::kStep64);
    }
    sm90::wgmma_commit();
    to = t0, lo = L;
    /* S into range for the next chunk (none after the last: the state is stored at e) */
    sm90::wgmma_wait<1>(); /* the state's group */
    sm90::pin(sacc);
    {
      float m0, m1;
      scan64::row_amax(sacc, m0, m1);
      const int d0 = more ? f16::rescale_by(m0, e0, 5) : 0, d1 = more ? f16::rescale_by(m1, e1, 5) : 0;
      fs0 = f16::exp2i(d0), fs1 = f16::exp2i(d1);
      e0 += d0, e1 += d1;
    }
    if (wg == 0 && more) {
      const float f0 = f16::exp2i(e0), f1 = f16::exp2i(e1);
#pragma unroll
      for (unsigned i = 0; i < 32; i++) dacc[i] = un[i] * ((i & 2u) ? f1 : f0);
    } else {
#pragma unroll
      for (unsigned i = 0; i < 32; i++) dacc[i] = 0.0f;
    }
    /* the O group too (an MMA group left in flight into the next step made ptxas serialise every
     * wgmma of the kernel, C7514); s16 is then free */
    sm90::wgmma_wait0();
    sm90::pin(oacc);
    sm90::pin(d16);
    sm90::pin(s16);
    if (__all_sync(0xffffffffu, fs0 == 1.0f && fs1 == 1.0f))
      scan64::to_frags(s16, sacc, 1.0f, 1.0f);
    else
      scan64::to_frags(s16, sacc, fs0, fs1);
    __syncwarp(); /* the warp's MMAs on the buffer are done */
    if (lane == 0) sm90::mbar_arrive(&empty[buf]);
    gL = gL_next;
    rec = nrec;
  }

  /* the last chunk's O: warpgroup 1's part through the exchange once more */
  if (nch > 0) {
    if (wg == 1) {
      scan64::bar_sync(scan64::kBarRead1, 256);
      scan64::put_x(smem + Y::X1O, smem + Y::X1OE, oacc, eo0, eo1, l.tid);
      scan64::bar_sync(scan64::kBarX, 256);
    } else {
      scan64::bar_sync(scan64::kBarX, 256);
      const int *xe = reinterpret_cast<const int *>(smem + Y::X1OE) + l.tid;
      const int y0 = xe[0], y1 = xe[128];
      const float *xv = reinterpret_cast<const float *>(smem + Y::X1O) + l.tid;
      const float g0 = f16::exp2i(-eo0), g1 = f16::exp2i(-eo1), h0 = f16::exp2i(-y0), h1 = f16::exp2i(-y1);
#pragma unroll
      for (unsigned i = 0; i < 32; i++)
        oacc[i] = fmaf(xv[i * 128u], (i & 2u) ? h1 : h0, oacc[i] * ((i & 2u) ? g1 : g0));
      scan64::store_o(oacc, o, p, h, c0, to, lo, smem + Y::X1O + l.w * 128u, l);
      scan64::bar_sync(scan64::kBarRead0, 256); /* warpgroup 1's last arrival */
    }
  }

  if (b.Sg) {
    const float f0 = f16::exp2i(-e0), f1 = f16::exp2i(-e1);
#pragma unroll
    for (unsigned j = 0; j < 8; j++)
#pragma unroll
      for (unsigned e = 0; e < 2; e++) {
        const unsigned k = k0 + 8 * j + 2 * l.t + e;
        float *x = b.Sg + (size_t)k * p.dv + r0;
        if (k < p.dk && ok0) x[0] = sacc[4 * j + e] * f0;
        if (k < p.dk && ok1) x[8] = sacc[4 * j + 2 + e] * f1;
      }
  }
}
