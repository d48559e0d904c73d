/* Phase 1 of delta_rule_prefill_chunked_f16 on sm_90a: scan_chunks_wg's chunk step with
 * IEEE half operands, one MMA a product.  Included by gdn_chunked.cu inside its anonymous
 * namespace and an sm_90a guard, after gdn_chunked_wg.cuh.
 *
 * The block (one warpgroup) owns 32 value columns of a head.  Per chunk step:
 *   D [64 tokens, 32] = U + (-W) S       k over dk: wgmma m64n32k16 f16
 *   O [64 tokens, 32] = Qs S + M D       k over dk, then over the chunk's tokens
 *   S [dk, 32]        = e^(G_L) S + Kd^T D   two m64 halves of dk, k over the tokens
 * The record's A operands are phase 0's fp16 planes (put_acc_tile<true>: the hi planes of
 * the record's layout, the lo planes unused), read into shared memory by two pairs of bulk
 * copies a chunk: (-W, Qs) after step b has read them, (Kd^T, M) after step d.  S and D
 * wait for the MMAs as fp16 planes, K-major and unswizzled, written from the accumulators by
 * stmatrix.
 *
 * Range: half stops at 65504 and the state grows with v.  The chunk is linear in S, U and D,
 * so the block keeps them times 2^e, one exponent for its 32 columns: the accumulators
 * hold S 2^e, D 2^e and O 2^e, U is multiplied by 2^e as it is loaded, O and the final
 * state by 2^-e as they are stored (exact: powers of two).  Before S is put into its plane
 * e is chosen so that the block's largest |S| lands in [2^5, 2^6) (at the start the largest
 * of |S| and the first chunk's |U|); D = U - W S is then below 65504 while U stays near S
 * and the rows of W below ~90 in norm (|(W S)_ij| <= |W_i| sqrt(dk) 2^6).  Where D exceeds
 * 2^15 anyway (v jumping far above the state), the block scales every accumulator down to
 * bring D into [2^5, 2^6) before D goes into its plane. */

namespace f16 {
constexpr unsigned kNT = 4, kBV = 8 * kNT, kNA = kBV / 2; /* 32 columns, m64n32 accumulators */
struct layout { /* bytes of dynamic shared memory */
  static constexpr unsigned RP = kPlane * 4;     /* one region's plane: -W, Qs or Kd^T (16 KiB) */
  static constexpr unsigned RM = kPlane * 2;     /* M's plane (8 KiB) */
  static constexpr unsigned KC = kNT * 128;      /* an 8-row k chunk of S's or D's plane */
  static constexpr unsigned W = 0, Q = W + RP, K = Q + RP, M = K + RP, S = M + RM;
  static constexpr unsigned D = S + kDk / 8 * KC, RED = D + kCh / 8 * KC, BAR = RED + 16,
                            end = BAR + 16; /* the warps' maxima, 2 mbarriers */
};
static_assert(layout::end <= kSmem * 4, "phase 1 fits in phase 0's shared memory");
static_assert(kRecQ == kRecW + 2 * kPlane && kRecK == kRecQ + 2 * kPlane && kRecM == kRecK + 2 * kPlane,
              "the hi planes of the record's regions");
using SS = sm90::wgmma_ss_f16<kBV>;
/* A descriptor's start address is its low 14 bits in 16-byte units (sm90::desc_plain), and
 * every operand here lies below 2^18 bytes: a k tile on is a constant added to it.  A: the
 * four row tiles of one k tile (kTileBlock bytes); B: two k chunks of a plane. */
constexpr uint64_t kStepA = kTileBlock >> 4, kStepB = (2 * layout::KC) >> 4;

/* The parts of a record that phase 1 reads, as five ranges (the hi planes of -W, Qs, Kd^T
 * and M; U with e^(G_L)), each asked of L2 by one bulk prefetch: range i by thread i of the
 * head's column block i % nvs (a per-line prefetch cost ~70 instructions a chunk step). */
struct pf_range {
  bool on;
  unsigned off, bytes; /* words into the record; bytes */
};
__device__ __forceinline__ pf_range prefetch_range(unsigned tid, const scan_part &b) {
  pf_range x;
  x.on = tid < 5 && tid % b.nvs == b.cb;
  x.off = tid == 0 ? kRecW : tid == 1 ? kRecQ : tid == 2 ? kRecK : tid == 3 ? kRecM : kRecU;
  x.bytes = 4 * (tid < 3 ? kPlane : tid == 3 ? kPlane / 2 : (unsigned)(kRec - kRecU));
  return x;
}
static_assert((kRec - kRecU) % 4 == 0 && kRec % 4 == 0 && kPlane % 8 == 0,
              "the ranges and the records are whole 16-byte units");

/* 16 accumulator rows (k chunks kc, kc + 1) of acc times sc as fp16 into a K-major plane of
 * kNT core matrices a k chunk. */
__device__ __forceinline__ void put_plane(uint32_t plane, unsigned kc, const float (&acc)[kNA], float sc,
                                          unsigned lane) {
  const unsigned i = lane >> 3, j = lane & 7u;
#pragma unroll
  for (unsigned nt = 0; nt < kNA / 4; nt += 2) {
    uint32_t h[4];
#pragma unroll
    for (unsigned m = 0; m < 4; m++) h[m] = f16x2_rn(sc * acc[4 * nt + 2 * m], sc * acc[4 * nt + 2 * m + 1]);
    const uint32_t off = (kc + (i & 1u)) * layout::KC + (nt + (i >> 1)) * 128u + j * 16u;
    sm90::stmatrix_x4_trans(plane + off, h[0], h[1], h[2], h[3]);
  }
}

/* max(m, |x|), as a tree (a chain of kNA dependent maxima waited ~4 cycles each) */
__device__ __forceinline__ float amax(float m, const float (&x)[kNA]) {
  float r[kNA / 2];
#pragma unroll
  for (unsigned i = 0; i < kNA / 2; i++) r[i] = fmaxf(fabsf(x[2 * i]), fabsf(x[2 * i + 1]));
#pragma unroll
  for (unsigned w = kNA / 4; w > 0; w /= 2)
#pragma unroll
    for (unsigned i = 0; i < w; i++) r[i] = fmaxf(r[i], r[i + w]);
  return fmaxf(m, r[0]);
}
/* The block's largest of the threads' m (a barrier; red: 4 floats of shared memory that no
 * thread reads again before the block's next barrier). */
__device__ __forceinline__ float block_max(float m, float *red, const lane_ids &l) {
  /* m >= 0: its bits order as unsigned integers do, and one redux.sync takes the warp's
   * largest (five dependent shuffles and maxima did: ~8 % of the chunk step's stalls) */
  m = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(m)));
  if ((l.tid & 31) == 0) red[l.w] = m;
  __syncthreads();
  return fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
}
/* The change of exponent that brings a block maximum mx (of values already times 2^e) into
 * [2^lo, 2^(lo+1)) (shift_into, gdn_chunked.cu; a change past 126 takes more chunks), kept so
 * that e stays in [-120, 120]; 0 for 0, infinities and NaN. */
__device__ __forceinline__ int rescale_by(float mx, int e, int lo) {
  int d = shift_into(mx, lo);
  if (e + d > 120) d = 120 - e;
  if (e + d < -120) d = -120 - e;
  return d;
}
}  // namespace f16

__device__ __forceinline__ void scan_chunks_wg16(unsigned char *smem, bf16 *o, float *state, const int *cu,
                                                 const int *slots, const float *wsf, const shape &p) {
  using Y = f16::layout;
  using f16::kNA;
  using f16::kNT;
  using f16::SS;
  scan_part b;
  if (!scan_part_of<f16::kBV>(b, state, cu, slots, p)) return;
  const unsigned h = b.h, c0 = b.c0;
  const lane_ids l = lanes();
  const unsigned lane = l.tid & 31;
  const unsigned nkb = (p.dk + 15) / 16;
  const bool half1 = p.dk > 64; /* S rows 64.. exist */
  bool ntv[kNT];
#pragma unroll
  for (unsigned nt = 0; nt < kNT; nt++) ntv[nt] = c0 + 8 * nt < p.dv;
  const uint32_t s0 = sm90::smem_u32(smem);
  float *red = reinterpret_cast<float *>(smem + Y::RED);
  uint64_t *bar = reinterpret_cast<uint64_t *>(smem + Y::BAR); /* (-W, Qs); (Kd^T, M) */
  const size_t nch = chunks_of(b), ts = (size_t)b.ts, te = (size_t)b.te;
  const uint32_t *rec = first_record(b, cu, wsf, p);
  const size_t rstep = (size_t)p.nv * kRec; /* one chunk on in the workspace */
  if (l.tid == 0) {
    for (unsigned i = 0; i < 2; i++) sm90::mbar_init_count(&bar[i], 2u); /* two copies a phase */
    sm90::mbar_init_fence();
    sm90::bulk_copy(smem + Y::W, rec + kRecW, Y::RP, &bar[0]);
    sm90::bulk_copy(smem + Y::Q, rec + kRecQ, Y::RP, &bar[0]);
    sm90::bulk_copy(smem + Y::K, rec + kRecK, Y::RP, &bar[1]);
    sm90::bulk_copy(smem + Y::M, rec + kRecM, Y::RM, &bar[1]);
  }

  /* Warp w holds S rows 16w.. (half 0) and 64 + 16w.. (half 1) x the block's columns */
  float sacc[2][kNA];
#pragma unroll
  for (unsigned hh = 0; hh < 2; hh++)
    load_state_rows<kNT>([&](unsigned nt, unsigned e) -> float & { return sacc[hh][4 * nt + e]; }, b.Sg, p,
                         64 * hh + 16 * l.w + l.g, l.t, ntv);
  const unsigned ra = 16 * l.w + l.g; /* this lane's token rows of D and O: ra, ra + 8 */
  float ad[kNA], ao[kNA], un[kNA];
  load_u_rows<kNT>([&](unsigned nt, unsigned e) -> float & { return un[4 * nt + e]; }, rec, c0, ra, l.t, ntv);
  /* the block's exponent: S and U as they are, then into range */
  int e = f16::rescale_by(f16::block_max(f16::amax(f16::amax(f16::amax(0.0f, sacc[0]), sacc[1]), un), red, l),
                          0, 5);
  {
    const float f = f16::exp2i(e);
#pragma unroll
    for (unsigned hh = 0; hh < 2; hh++)
#pragma unroll
      for (unsigned i = 0; i < kNA; i++) sacc[hh][i] *= f;
  }
  f16::put_plane(s0 + Y::S, 2 * l.w, sacc[0], 1.0f, lane);
  f16::put_plane(s0 + Y::S, 8 + 2 * l.w, sacc[1], 1.0f, lane);
  sm90::fence_proxy_async();
  __syncthreads(); /* the barriers are initialised, S is in its plane */

  const f16::pf_range pf = f16::prefetch_range(l.tid, b);
  /* descriptors of the operands' first k tiles (a k tile on: + kStepA / kStepB) */
  const uint64_t dW = sm90::desc_plain(s0 + Y::W, 128, 256), dQ = sm90::desc_plain(s0 + Y::Q, 128, 256);
  const uint64_t dK = sm90::desc_plain(s0 + Y::K, 128, 256), dM = sm90::desc_plain(s0 + Y::M, 128, 256);
  const uint64_t dS = sm90::desc_plain(s0 + Y::S, Y::KC, 128), dD = sm90::desc_plain(s0 + Y::D, Y::KC, 128);
  float gL_next = __uint_as_float(__ldg(rec + kRecG)), fs = 1.0f;
#pragma unroll 1
  for (size_t ci = 0; ci < nch; ci++) {
    const size_t t0 = ts + ci * kCh;
    const unsigned L = te - t0 < kCh ? (unsigned)(te - t0) : kCh;
    const bool more = ci + 1 < nch;
    const uint32_t *nrec = rec + rstep;
    const uint32_t par = (uint32_t)ci & 1u;
    if (pf.on && ci + 2 < nch) sm90::bulk_prefetch_l2(nrec + rstep + pf.off, pf.bytes); /* the one after next */
    const float gL = gL_next * fs; /* the decay, and the rescale S's plane already has */
    fs = 1.0f;
    if (more) gL_next = __uint_as_float(__ldg(nrec + kRecG));
    const float fe = f16::exp2i(e);
#pragma unroll
    for (unsigned i = 0; i < kNA; i++) ad[i] = un[i] * fe, ao[i] = 0.0f;
#pragma unroll
    for (unsigned hh = 0; hh < 2; hh++)
#pragma unroll
      for (unsigned i = 0; i < kNA; i++) sacc[hh][i] *= gL;

    /* b. D = U + (-W) S and O = Qs S, k over dk */
    sm90::mbar_wait(&bar[0], par);
    sm90::pin(ad);
    sm90::pin(ao);
    sm90::pin(sacc[0]);
    sm90::pin(sacc[1]);
    sm90::wgmma_fence();
    if (nkb == kDk / 16) { /* dk = 128: unrolled, the descriptors advanced by constants */
#pragma unroll
      for (unsigned kb = 0; kb < kDk / 16; kb++) {
        SS::run(ad, dW + kb * f16::kStepA, dS + kb * f16::kStepB);
        SS::run(ao, dQ + kb * f16::kStepA, dS + kb * f16::kStepB);
      }
    } else {
#pragma unroll 1
      for (unsigned kb = 0; kb < nkb; kb++) {
        SS::run(ad, dW + kb * f16::kStepA, dS + kb * f16::kStepB);
        SS::run(ao, dQ + kb * f16::kStepA, dS + kb * f16::kStepB);
      }
    }
    sm90::wgmma_commit();
    /* the next chunk's U, in flight while step b's MMAs run and through steps c to e (issued
     * in step d instead, the core took 2 us more at 4096 tokens: perf-prefill.md part 13) */
    if (more)
      load_u_rows<kNT>([&](unsigned nt, unsigned e2) -> float & { return un[4 * nt + e2]; }, nrec, c0, ra, l.t,
                       ntv);
    sm90::wgmma_wait0();
    sm90::pin(ad);
    sm90::pin(ao);

    /* c. D into its plane; a D past 2^15 scales the block down first */
    f16::put_plane(s0 + Y::D, 2 * l.w, ad, 1.0f, lane);
    sm90::fence_proxy_async();
    if (__syncthreads_or(f16::amax(0.0f, ad) >= 32768.0f)) {
      const int d = f16::rescale_by(f16::block_max(f16::amax(0.0f, ad), red, l), e, 5);
      const float f = f16::exp2i(d);
      e += d;
#pragma unroll
      for (unsigned i = 0; i < kNA; i++) ad[i] *= f, ao[i] *= f, sacc[0][i] *= f, sacc[1][i] *= f;
      f16::put_plane(s0 + Y::D, 2 * l.w, ad, 1.0f, lane);
      sm90::fence_proxy_async();
      __syncthreads();
    }
    /* every MMA of step b is done: (-W, Qs) of the next chunk */
    if (more && l.tid == 0) {
      sm90::fence_proxy_async();
      sm90::bulk_copy(smem + Y::W, nrec + kRecW, Y::RP, &bar[0]);
      sm90::bulk_copy(smem + Y::Q, nrec + kRecQ, Y::RP, &bar[0]);
    }

    /* d. O += M D and S = e^(G_L) S + Kd^T D, k over the chunk's tokens */
    sm90::mbar_wait(&bar[1], par);
    {
      const unsigned nkt = (L + 15) / 16; /* the chunk's token tiles */
      sm90::wgmma_fence();
      if (nkt == kCh / 16 && half1) { /* a whole chunk, dk > 64: unrolled */
#pragma unroll
        for (unsigned kb = 0; kb < kCh / 16; kb++) {
          SS::run(sacc[0], dK + 2 * kb * f16::kStepA, dD + kb * f16::kStepB);
          SS::run(sacc[1], dK + (2 * kb + 1) * f16::kStepA, dD + kb * f16::kStepB);
          SS::run(ao, dM + kb * f16::kStepA, dD + kb * f16::kStepB);
        }
      } else {
#pragma unroll 1
        for (unsigned kb = 0; kb < nkt; kb++) {
          SS::run(sacc[0], dK + 2 * kb * f16::kStepA, dD + kb * f16::kStepB);
          if (half1) SS::run(sacc[1], dK + (2 * kb + 1) * f16::kStepA, dD + kb * f16::kStepB);
          SS::run(ao, dM + kb * f16::kStepA, dD + kb * f16::kStepB);
        }
      }
      sm90::wgmma_commit();
    }
    sm90::wgmma_wait0();
    sm90::pin(ao);
    sm90::pin(sacc[0]);
    sm90::pin(sacc[1]);

    /* e. O out (times 2^-e); S into range and into its plane (its last reader, step b, is done) */
    const float fi = f16::exp2i(-e);
#pragma unroll
    for (unsigned i = 0; i < kNA; i++) ao[i] *= fi;
    store_o_rows<kNT>([&](unsigned nt, unsigned e2) -> float & { return ao[4 * nt + e2]; }, o, p, h, c0, t0, L,
                      ra, l.t, ntv);
    if (more) {
      /* S alone: the next U is not waited for here (its loads are in flight until the next
       * step begins); a U far above S shows as a D past 2^15 at step c, which rescales */
      const int d = f16::rescale_by(f16::block_max(f16::amax(f16::amax(0.0f, sacc[0]), sacc[1]), red, l), e, 5);
      fs = f16::exp2i(d); /* S's accumulators take it with the next step's decay */
      e += d;
      f16::put_plane(s0 + Y::S, 2 * l.w, sacc[0], fs, lane);
      if (half1) f16::put_plane(s0 + Y::S, 8 + 2 * l.w, sacc[1], fs, lane);
      sm90::fence_proxy_async();
      __syncthreads(); /* every MMA of this chunk is done: (Kd^T, M) of the next */
      if (l.tid == 0) {
        sm90::fence_proxy_async();
        sm90::bulk_copy(smem + Y::K, nrec + kRecK, Y::RP, &bar[1]);
        sm90::bulk_copy(smem + Y::M, nrec + kRecM, Y::RM, &bar[1]);
      }
    }
    rec = nrec;
  }

  if (b.Sg) {
    const float fi = f16::exp2i(-e);
#pragma unroll
    for (unsigned hh = 0; hh < 2; hh++) {
#pragma unroll
      for (unsigned i = 0; i < kNA; i++) sacc[hh][i] *= fi;
      store_state_rows<kNT>([&](unsigned nt, unsigned e2) -> float & { return sacc[hh][4 * nt + e2]; }, b.Sg, p,
                            64 * hh + 16 * l.w + l.g, l.t, ntv);
    }
  }
}
