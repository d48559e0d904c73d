/* Phase 1 of the chunked delta rule on sm_90a: the chunk step of scan_chunks on warpgroup
 * MMAs.  Included by gdn_chunked.cu inside its anonymous namespace and an sm_90a guard.
 *
 * The block (one warpgroup) owns 32 value columns of a head.  Per chunk step:
 *   D [64 tokens, 32] = U + (-W) S       k over dk: wgmma m64n32k16
 *   O [64 tokens, 32] = Qs S + M D       k over dk, then over the chunk's tokens
 *   S [dk, 32]        = e^(G_L) S + Kd^T D   two m64 halves of dk, k over the tokens
 * with every product the three bf16 parts of scan_chunks (lo*hi, hi*lo, hi*hi), so the
 * accuracy is phase 1's of delta_rule_prefill_chunked.  The workspace record is read whole
 * into shared memory by two bulk copies a chunk: (-W, Qs) into two buffers, two chunks
 * ahead, and (Kd^T, M) into one, a chunk ahead.  The record's tiles are in wgmma's
 * canonical K-major layout, so the MMAs read every A operand (-W, Qs, Kd^T, M) from there
 * (A from registers cost ~30 % more: docs/perf-prefill.md, v9).  S and D wait for the MMAs
 * as (hi, lo) bf16 planes, K-major and unswizzled, written from the accumulators by
 * stmatrix, side by side: the hi and lo columns of one k chunk are the B operand of one
 * m64n64k16, so a_hi [b_hi | b_lo] is one MMA that reads a_hi once, and a_lo b_hi a second
 * one, half as wide, into the left half of the same accumulators (the product is then the
 * sum of the halves). */

template <unsigned NT> struct layout_wg { /* bytes of dynamic shared memory */
  static constexpr unsigned BV = 8 * NT;
  static constexpr unsigned RA = (unsigned)(kRecQ - kRecW) * 4; /* -W and Qs: 64 tiles */
  static constexpr unsigned RB = (unsigned)(kRecU - kRecK) * 4; /* Kd^T and M: 48 tiles */
  /* S and D planes: k chunks of 8 rows, each the block's NT 8-column core matrices of the
   * hi plane then NT of the lo plane in a row (128 bytes apart), so that an MMA's B tile
   * (two k chunks) is 2 KC contiguous bytes, KC / 2 wide for one plane, KC for both */
  static constexpr unsigned KC = 2 * NT * 128, LO = NT * 128; /* the lo plane: LO bytes on */
  static constexpr unsigned PS = kDk / 8 * KC, PD = kCh / 8 * KC; /* bytes of S's, D's planes */
  /* A: two buffers of (-W, Qs), chunk c in buffer c % 2; B: one of (Kd^T, M) */
  static constexpr unsigned A = 0, B = A + 4 * RA, S = B + RB, D = S + PS, BAR = D + PD,
                            end = BAR + 32; /* 3 mbarriers, a multiple of 16 bytes */
};
static_assert(kRecQ - kRecW == 32 * kTile && kRecK == kRecQ + 32 * kTile &&
                  kRecM == kRecK + 32 * kTile && kRecU == kRecM + 16 * kTile,
              "the two bulk copies take contiguous parts of the record");

/* A operand blocks in shared memory: the bytes of a region's plane, and of the four row
 * tiles at one k tile (the record's canonical layout, gdn_chunked.cu) */
constexpr uint32_t kPlaneB = kPlane * 4, kTileBlock = 4 * kTile * 2;

/* 16 accumulator rows (k chunks kc, kc + 1 of the planes) of wgmma accumulators acc (NA / 4
 * tiles of 8 columns) as the hi and lo planes of a K-major operand at `planes`, in
 * layout_wg's order: each k chunk the NA / 4 core matrices of the hi plane, then those of
 * the lo plane. */
template <unsigned NA>
__device__ __forceinline__ void put_planes(uint32_t planes, unsigned kc, const float (&acc)[NA],
                                           unsigned lane) {
  constexpr uint32_t lo = NA / 4 * 128u, kcb = 2 * lo; /* the lo plane's offset, a k chunk */
  const uint32_t hi = planes;
  const unsigned i = lane >> 3, j = lane & 7u;
#pragma unroll
  for (unsigned nt = 0; nt < NA / 4; nt += 2) {
    uint32_t h[4], l[4];
#pragma unroll
    for (unsigned m = 0; m < 4; m++) split2(acc[4 * nt + 2 * m], acc[4 * nt + 2 * m + 1], h[m], l[m]);
    const uint32_t off = (kc + (i & 1u)) * kcb + (nt + (i >> 1)) * 128u + j * 16u;
    sm90::stmatrix_x4_trans(hi + off, h[0], h[1], h[2], h[3]);
    sm90::stmatrix_x4_trans(hi + lo + off, l[0], l[1], l[2], l[3]);
  }
}

/* The sum of the two halves of paired accumulators x (a product a_hi [b_hi | b_lo] plus
 * a_lo b_hi in the left half). */
template <unsigned NA>
__device__ __forceinline__ void halves_sum(float (&y)[NA], const float (&x)[2 * NA]) {
#pragma unroll
  for (unsigned i = 0; i < NA; i++) y[i] = x[i] + x[NA + i];
}

/* A product close to f32 is three products, hi*hi, lo*hi and hi*lo (b's hi and lo planes),
 * here two MMAs: a_hi [b_hi | b_lo] (N = 2 BV) and a_lo b_hi (N = BV) into the left half of
 * the same accumulators.  The chunk step issues the MMAs of several sums in turn, so that
 * no two in a row write the same accumulators: a chain of dependent MMAs waits out each
 * one's latency, several times its tensor work. */
template <unsigned NT>
__device__ __forceinline__ void scan_chunks_wg(unsigned char *smem, bf16 *o, float *state,
                                               const int *cu, const int *slots, const float *wsf,
                                               const shape &p) {
  using Y = layout_wg<NT>;
  constexpr unsigned BV = Y::BV, NA = BV / 2;
  using SS = sm90::wgmma_ss<BV>;
  using SS2 = sm90::wgmma_ss<2 * BV>;
  using sm90::left_half;
  static_assert(Y::LO == NA / 4 * 128 && Y::KC == 2 * Y::LO, "put_planes writes layout_wg's planes");
  scan_part b;
  if (!scan_part_of<BV>(b, state, cu, slots, p)) return;
  const unsigned h = b.h, c0 = b.c0;
  const lane_ids l = lanes();
  const unsigned lane = l.tid & 31;
  const unsigned nkb = (p.dk + 15) / 16;
  const bool half1 = p.dk > 64; /* S rows 64.. exist */
  bool ntv[NT];
#pragma unroll
  for (unsigned nt = 0; nt < NT; nt++) ntv[nt] = c0 + 8 * nt < p.dv;
  const uint32_t s0 = sm90::smem_u32(smem);
  uint64_t *bar = reinterpret_cast<uint64_t *>(smem + Y::BAR); /* A buffers 0, 1; B */
  const size_t nch = chunks_of(b), ts = (size_t)b.ts, te = (size_t)b.te;
  const uint32_t *rec = first_record(b, cu, wsf, p);
  const size_t rstep = (size_t)p.nv * kRec; /* one chunk on in the workspace */
  if (l.tid == 0) {
    for (unsigned i = 0; i < 3; i++) sm90::mbar_init(&bar[i]);
    sm90::bulk_copy(smem + Y::A, rec + kRecW, 2 * Y::RA, &bar[0]);
    if (nch > 1) sm90::bulk_copy(smem + Y::A + 2 * Y::RA, rec + rstep + kRecW, 2 * Y::RA, &bar[1]);
    sm90::bulk_copy(smem + Y::B, rec + kRecK, Y::RB, &bar[2]);
  }

  /* Warp w holds S rows 16w.. (half 0) and 64 + 16w.. (half 1) x the block's columns, as
   * paired accumulators: S is the sum of the left and the right half. */
  float sacc[2][2 * NA], sv[NA];
#pragma unroll
  for (unsigned hh = 0; hh < 2; hh++) {
    load_state_rows<NT>([&](unsigned nt, unsigned e) -> float & { return sacc[hh][4 * nt + e]; }, b.Sg, p,
                        64 * hh + 16 * l.w + l.g, l.t, ntv);
#pragma unroll
    for (unsigned i = NA; i < 2 * NA; i++) sacc[hh][i] = 0.0f;
  }
  /* S's planes whole (rows past dk are zero) */
  put_planes(s0 + Y::S, 2 * l.w, left_half(sacc[0]), lane);
  put_planes(s0 + Y::S, 8 + 2 * l.w, left_half(sacc[1]), lane);
  const unsigned ra = 16 * l.w + l.g; /* this lane's token rows of D and O: ra, ra + 8 */
  float ad[2 * NA], ao[2 * NA], un[NA];
  load_u_rows<NT>([&](unsigned nt, unsigned e) -> float & { return un[4 * nt + e]; }, rec, c0, ra, l.t, ntv);
  sm90::fence_proxy_async();
  __syncthreads(); /* the barriers are initialised, S is in its planes */

  float gL_next = __uint_as_float(__ldg(rec + kRecG));
#pragma unroll 1
  for (size_t ci = 0; ci < nch; ci++) {
    const size_t t0 = ts + ci * kCh;
    const unsigned L = te - t0 < kCh ? (unsigned)(te - t0) : kCh;
    const bool more = ci + 1 < nch;
    const uint32_t *nrec = rec + rstep;
    const unsigned buf = (unsigned)(ci & 1);
    if (ci + 2 < nch) prefetch_record(nrec + rstep, l.tid, kBlock, b); /* the one after next */
    /* Accumulators are set only while no MMA is in flight (else ptxas serializes them all):
     * D's U, O's zeros and S's decay come first. */
    const float gL = gL_next; /* loaded a step ahead: the decay is the step's first use */
    if (more) gL_next = __uint_as_float(__ldg(nrec + kRecG));
#pragma unroll
    for (unsigned i = 0; i < NA; i++) ad[i] = un[i], ad[NA + i] = 0.0f;
#pragma unroll
    for (unsigned i = 0; i < 2 * NA; i++) ao[i] = 0.0f;
#pragma unroll
    for (unsigned hh = 0; hh < 2; hh++)
#pragma unroll
      for (unsigned i = 0; i < 2 * NA; i++) sacc[hh][i] *= gL;

    /* b. D = U + (-W) S and O = Qs S, k over dk, one group of MMAs */
    sm90::mbar_wait(&bar[buf], (uint32_t)(ci >> 1) & 1u);
    sm90::pin(ad);
    sm90::pin(ao);
    sm90::pin(sacc[0]);
    sm90::pin(sacc[1]);
    {
      const uint32_t aw = s0 + Y::A + buf * 2 * Y::RA, aq = aw + Y::RA; /* -W, Qs regions */
      sm90::wgmma_fence();
#pragma unroll 1
      for (unsigned kb = 0; kb < nkb; kb++) {
        const uint32_t t = kb * kTileBlock; /* the four row tiles at k tile kb */
        const uint64_t wh = sm90::desc_plain(aw + t, 128, 256), wl = sm90::desc_plain(aw + kPlaneB + t, 128, 256);
        const uint64_t qh = sm90::desc_plain(aq + t, 128, 256), ql = sm90::desc_plain(aq + kPlaneB + t, 128, 256);
        /* S's hi | lo planes at N = 2 BV, its hi plane alone at N = BV */
        const uint64_t bp = sm90::desc_plain(s0 + Y::S + 2 * Y::KC * kb, Y::KC, 128);
        SS2::run(ad, wh, bp);
        SS2::run(ao, qh, bp);
        SS::run(left_half(ad), wl, bp);
        SS::run(left_half(ao), ql, bp);
      }
      sm90::wgmma_commit();
    }
    sm90::wgmma_wait0();
    sm90::pin(ad);
    float dsum[NA];
    halves_sum(dsum, ad);

    /* c. D into its planes */
    put_planes(s0 + Y::D, 2 * l.w, dsum, lane);
    sm90::fence_proxy_async();
    __syncthreads();

    /* d. O += M D and S = e^(G_L) S + Kd^T D, k over the chunk's tokens, one group */
    sm90::mbar_wait(&bar[2], (uint32_t)ci & 1u);
    {
      const uint32_t ak = s0 + Y::B, am = ak + Y::RA; /* Kd^T, M regions */
      const unsigned nkt = (L + 15) / 16; /* the chunk's token tiles */
      sm90::wgmma_fence();
#pragma unroll 1
      for (unsigned kb = 0; kb < nkt; kb++) {
        const uint32_t t0 = 2 * kb * kTileBlock, t1 = t0 + kTileBlock, tm = kb * kTileBlock;
        const uint64_t k0h = sm90::desc_plain(ak + t0, 128, 256), k0l = sm90::desc_plain(ak + kPlaneB + t0, 128, 256);
        const uint64_t k1h = sm90::desc_plain(ak + t1, 128, 256), k1l = sm90::desc_plain(ak + kPlaneB + t1, 128, 256);
        const uint64_t mh = sm90::desc_plain(am + tm, 128, 256), ml = sm90::desc_plain(am + kPlaneB / 2 + tm, 128, 256);
        const uint64_t bp = sm90::desc_plain(s0 + Y::D + 2 * Y::KC * kb, Y::KC, 128); /* D's, likewise */
        SS2::run(sacc[0], k0h, bp);
        if (half1) SS2::run(sacc[1], k1h, bp);
        SS2::run(ao, mh, bp);
        SS::run(left_half(sacc[0]), k0l, bp);
        if (half1) SS::run(left_half(sacc[1]), k1l, bp);
        SS::run(left_half(ao), ml, bp);
      }
      sm90::wgmma_commit();
    }
    /* the next chunk's U, in flight while the last MMAs run */
    if (more)
      load_u_rows<NT>([&](unsigned nt, unsigned e) -> float & { return un[4 * nt + e]; }, nrec, c0, ra, l.t, ntv);
    sm90::wgmma_wait0();
    sm90::pin(ao);
    sm90::pin(sacc[0]);
    sm90::pin(sacc[1]);

    /* e. O, S into its planes (their last reader, step b, is done) */
    float osum[NA];
    halves_sum(osum, ao);
    if (more) {
      halves_sum(sv, sacc[0]);
      put_planes(s0 + Y::S, 2 * l.w, sv, lane);
      if (half1) {
        halves_sum(sv, sacc[1]);
        put_planes(s0 + Y::S, 8 + 2 * l.w, sv, lane);
      }
    }
    store_o_rows<NT>([&](unsigned nt, unsigned e) -> float & { return osum[4 * nt + e]; }, o, p, h, c0, t0, L,
                     ra, l.t, ntv);
    if (more) {
      sm90::fence_proxy_async();
      __syncthreads(); /* every MMA of this chunk is done: both buffers are free */
      if (l.tid == 0) {
        sm90::fence_proxy_async();
        sm90::bulk_copy(smem + Y::B, nrec + kRecK, Y::RB, &bar[2]);
        if (ci + 2 < nch)
          sm90::bulk_copy(smem + Y::A + buf * 2 * Y::RA, nrec + rstep + kRecW, 2 * Y::RA, &bar[buf]);
      }
    }
    rec = nrec;
  }

  if (b.Sg) {
#pragma unroll
    for (unsigned hh = 0; hh < 2; hh++) {
      halves_sum(sv, sacc[hh]);
      store_state_rows<NT>([&](unsigned nt, unsigned e) -> float & { return sv[4 * nt + e]; }, b.Sg, p,
                           64 * hh + 16 * l.w + l.g, l.t, ntv);
    }
  }
}
