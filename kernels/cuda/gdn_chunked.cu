/* gdn_chunked module: the gated delta rule prefill in chunks of 64 tokens, on tensor cores.
 *
 * For one value head and a chunk of L <= 64 tokens with in-chunk cumulative log decay G
 * (G_i = g_0 + ... + g_i) the token recurrence of delta_rule_prefill rearranges into
 *   A = strictly_lower(beta_i (k_i.k_j) e^(G_i - G_j)),  T = (I + A)^-1
 *   M = lower_with_diagonal((q_i.k_j) e^(G_i - G_j))
 * and, from the state S at the chunk start,
 *   D = T diag(beta) (V - (K * e^G) S)     the corrections d_i of the chunk's tokens
 *   O = (Q * e^G) S + M D
 *   S = e^(G_L) S + (K * e^(G_L - G))^T D
 * (D = U - W S with the WY factors U = T diag(beta) V, W = T diag(beta) (K * e^G)).
 * Every exponent is of a difference G_i - G_j with j <= i, or of G itself, so nothing
 * overflows however strong the decay.
 *
 * Phase 0, one block per (chunk, value head), all chunks at once: G, then K K^T and Q K^T
 * on tensor cores, A and M, and T by forward substitution (one thread per column of T).
 * T, M and G go to the workspace.  Phase 1, one block per (sequence, value head, 32 value
 * columns, or 16 when the grid has twice the blocks): the chunks of the sequence in order,
 * the block's [dk, 32] slice of S kept in mma accumulators from the first chunk to the
 * last, so the state is read and written once per sequence.
 *
 * Products are mma.sync m16n8k8 with f32 accumulation and every f32 operand split into
 * two tf32 parts (three products per tile: about f32 accuracy, see mma3); the state, the
 * decays and every sum stay f32.  Inside each 8-wide k step
 * the logical k = t and t + 4 of lane (g = lane/4, t = lane%4) are the memory columns 2t
 * and 2t + 1: A fragments then come from global memory as float2, and B fragments from
 * shared rows of stride 36 floats without bank conflicts.
 *
 * CUDA only (inline PTX): for HIP this file compiles to nothing, the kernel is absent
 * and the layer takes gdn.delta_rule_prefill. */
#include "common.cuh"

#if !defined(__HIP_PLATFORM_AMD__)

namespace {
constexpr unsigned kBlock = mk_block("delta_rule_prefill_chunked");
static_assert(kBlock == 128, "the chunked delta rule is written for 4 warps of 32 lanes");
constexpr unsigned kCh = 64;  /* tokens per chunk */
constexpr unsigned kDk = 128; /* largest key head dim */
constexpr unsigned kLd = 36;  /* shared row stride of B operands: conflict-free (see above) */
constexpr unsigned kLdA = 68; /* row stride of A in phase 0: 16-byte rows */

/* Workspace record of one (chunk, value head): T [64,64], M [64,64], G [64] (f32). */
constexpr size_t kRecT = 0, kRecM = (size_t)kCh * kCh, kRecG = 2 * (size_t)kCh * kCh;
constexpr size_t kRec = 2 * (size_t)kCh * kCh + kCh;
static_assert(kRec * 4 == 33024, "kernels.def states the record size");

/* Shared memory (floats): phase 0 uses g, beta, A and T's columns; phase 1 S, E, D and
 * three vectors. */
constexpr unsigned kSmem0 = 2 * kCh + kCh * kLdA + kCh * kCh;
constexpr unsigned kSmem1 = kDk * kLd + 2 * kCh * kLd + 3 * kCh;
constexpr unsigned kSmem = kSmem0 > kSmem1 ? kSmem0 : kSmem1;

#ifndef GDN_CHUNKED_EMULATED /* a host emulation supplies these two */
__device__ __forceinline__ float tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

/* d += a b on one 16x8x8 tile; a and b already hold tf32 values. */
__device__ __forceinline__ void mma(float d[4], const float a[4], const float b[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
        "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])));
}

__device__ __forceinline__ void prefetch_l2(const void *ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
}
#endif

__device__ __forceinline__ float2 ld2(const float *p) {
  return __ldg(reinterpret_cast<const float2 *>(p));
}
__device__ __forceinline__ float2 ld2_if(bool ok, const float *p) {
  return ok ? ld2(p) : make_float2(0.0f, 0.0f);
}

/* First workspace chunk of sequence s: min(cu[s], floor((cu[s] + 63 s) / 64)).  Both terms
 * grow by at least ceil(len_s / 64) from one sequence to the next, so sequences get
 * disjoint ranges and NC = that formula at s = S bounds the total. */
__device__ __forceinline__ size_t first_chunk(const int *cu, unsigned s) {
  const size_t a = (size_t)cu[s], b = ((size_t)cu[s] + (size_t)(kCh - 1) * s) / kCh;
  return a < b ? a : b;
}

struct lane_ids {
  unsigned tid, w, g, t; /* thread, warp, lane / 4, lane % 4 */
};
__device__ __forceinline__ lane_ids lanes() {
  lane_ids l;
  l.tid = threadIdx.x;
  l.w = l.tid >> 5;
  l.g = (l.tid & 31) >> 2;
  l.t = l.tid & 3;
  return l;
}

struct shape {
  unsigned s, nk, nv, dk, dv;
  size_t C; /* qkv row width */
};

/* ---- products --------------------------------------------------------------------- */

/* x = hi + lo, both tf32: the pair keeps about 22 significant bits. */
__device__ __forceinline__ void split(float x, float &hi, float &lo) {
  hi = tf32(x);
  lo = tf32(x - hi);
}

/* d += a b close to f32 accuracy: three tf32 products (the lo lo term is below f32
 * rounding).  Plain tf32 would round every operand to 11 bits, and its rounding noise,
 * amplified by the gated norm on heads whose output nearly cancels, moves the layer output
 * by 1e-3 between two runs whose inputs differ in the last bits. */
__device__ __forceinline__ void mma3(float d[4], const float ah[4], const float al[4],
                                     const float bh[2], const float bl[2]) {
  mma(d, al, bh);
  mma(d, ah, bl);
  mma(d, ah, bh);
}

__device__ __forceinline__ void split_a(const float a[4], float ah[4], float al[4]) {
#pragma unroll
  for (unsigned i = 0; i < 4; i++) split(a[i], ah[i], al[i]);
}

/* B fragment of 8-column tile nt from shared rows col, col + 1 (stride kLd). */
__device__ __forceinline__ void b_shared(const float *Bs, unsigned col, unsigned nt, unsigned g,
                                         float bh[2], float bl[2]) {
  split(Bs[col * kLd + 8 * nt + g], bh[0], bl[0]);
  split(Bs[(col + 1) * kLd + 8 * nt + g], bh[1], bl[1]);
}

/* Loads of A rows pa, pb (null: a zero row) for the k steps k0 .. k0+3 below nks. */
__device__ __forceinline__ void load_rows(float2 buf[4][2], const float *pa, const float *pb,
                                          unsigned k0, unsigned nks, unsigned t) {
#pragma unroll
  for (unsigned q = 0; q < 4; q++) {
    const bool ok = k0 + q < nks;
    const unsigned col = 8 * (k0 + q) + 2 * t;
    buf[q][0] = ok && pa ? ld2(pa + col) : make_float2(0.0f, 0.0f);
    buf[q][1] = ok && pb ? ld2(pb + col) : make_float2(0.0f, 0.0f);
  }
}

/* acc[nt] += A B for a warp's 16-row tile (this lane's rows pa, pb scaled by sa, sb; k
 * contiguous in global memory) times B in shared memory (k rows, the block's NT 8-column
 * tiles), over k steps [0, nks).  The loads of the next four k steps are in flight while
 * the current four are multiplied. */
template <unsigned NT>
__device__ __forceinline__ void rows_times_shared(float acc[NT][4], const float *pa,
                                                  const float *pb, float sa, float sb,
                                                  const float *Bs, unsigned nks,
                                                  const bool ntv[NT], const lane_ids &l) {
  float2 cur[4][2], nxt[4][2];
  load_rows(cur, pa, pb, 0, nks, l.t);
#pragma unroll 1
  for (unsigned k0 = 0; k0 < nks; k0 += 4) {
    load_rows(nxt, pa, pb, k0 + 4, nks, l.t);
#pragma unroll
    for (unsigned q = 0; q < 4; q++) {
      if (k0 + q < nks) {
        const unsigned col = 8 * (k0 + q) + 2 * l.t;
        const float a[4] = {cur[q][0].x * sa, cur[q][1].x * sb, cur[q][0].y * sa, cur[q][1].y * sb};
        float ah[4], al[4];
        split_a(a, ah, al);
#pragma unroll
        for (unsigned nt = 0; nt < NT; nt++) {
          if (ntv[nt]) {
            float bh[2], bl[2];
            b_shared(Bs, col, nt, l.g, bh, bl);
            mma3(acc[nt], ah, al, bh, bl);
          }
        }
      }
    }
#pragma unroll
    for (unsigned q = 0; q < 4; q++) cur[q][0] = nxt[q][0], cur[q][1] = nxt[q][1];
  }
}

/* ---- phase 0: T, M and G of one chunk ---------------------------------------------- */

__device__ __forceinline__ void prep_chunk(float *sm, const float *qkv, const float *g,
                                           const float *beta, const int *cu, float *ws,
                                           const shape &p) {
  const unsigned h = blockIdx.x % p.nv;
  const size_t j = blockIdx.x / p.nv;
  unsigned lo = 0, hi = p.s - 1; /* the last sequence whose chunks start at or before j */
  while (lo < hi) {
    const unsigned mid = (lo + hi + 1) / 2;
    if (first_chunk(cu, mid) <= j)
      lo = mid;
    else
      hi = mid - 1;
  }
  const size_t first = first_chunk(cu, lo);
  const int ts = cu[lo], te = cu[lo + 1];
  if (first > j || te <= ts || (j - first) >= ((size_t)(te - ts) + kCh - 1) / kCh) return;
  const size_t t0 = (size_t)ts + (j - first) * kCh;
  const unsigned L = (size_t)te - t0 < kCh ? (unsigned)((size_t)te - t0) : kCh;
  const unsigned kh = h / (p.nv / p.nk);
  const float *Q = qkv + t0 * p.C + (size_t)kh * p.dk;
  const float *K = qkv + t0 * p.C + (size_t)(p.nk + kh) * p.dk;
  float *rec = ws + (j * p.nv + h) * kRec;
  float *gs = sm, *bs = sm + kCh, *As = sm + 2 * kCh, *Xs = As + kCh * kLdA;
  const lane_ids l = lanes();

  { /* the chunk's q and k rows start their way to L2 while G is summed */
    const unsigned lk = (p.dk + 31) / 32; /* 128-byte lines per row */
    for (unsigned i = l.tid; i < L * 2 * lk; i += kBlock) {
      const unsigned r = i / (2 * lk), c = i % (2 * lk);
      prefetch_l2(c < lk ? Q + r * p.C + 32 * c : K + r * p.C + 32 * (c - lk));
    }
  }
  if (l.tid < kCh) {
    const bool in = l.tid < L;
    gs[l.tid] = in ? g[(t0 + l.tid) * p.nv + h] : 0.0f;
    bs[l.tid] = in ? beta[(t0 + l.tid) * p.nv + h] : 0.0f;
  }
  __syncthreads();
  float G = 0.0f; /* tokens past L add nothing: G stays G_{L-1} */
  if (l.tid < kCh)
    for (unsigned i = 0; i <= l.tid; i++) G += gs[i];
  __syncthreads();
  if (l.tid < kCh) {
    gs[l.tid] = G;
    rec[kRecG + l.tid] = G;
  }
  __syncthreads();

  /* Warp w: rows 16w..16w+15 of K K^T and Q K^T, column tiles up to the diagonal; one k
   * step per iteration, its ten loads issued together. */
  const unsigned ra = 16 * l.w + l.g, rb = ra + 8;
  const unsigned ntiles = 2 * l.w + 2;
  float kk[8][4], qk[8][4];
#pragma unroll
  for (unsigned nt = 0; nt < 8; nt++)
#pragma unroll
    for (unsigned e = 0; e < 4; e++) kk[nt][e] = qk[nt][e] = 0.0f;
  const unsigned nks = p.dk / 8;
#pragma unroll 1
  for (unsigned k0 = 0; k0 < nks; k0++) {
    float2 ka[1], kb[1], qa[1], qb[1], kn[1][8];
#pragma unroll
    for (unsigned q = 0; q < 1; q++) {
      const bool ok = k0 + q < nks;
      const unsigned col = 8 * (k0 + q) + 2 * l.t;
      ka[q] = ld2_if(ok && ra < L, K + ra * p.C + col);
      kb[q] = ld2_if(ok && rb < L, K + rb * p.C + col);
      qa[q] = ld2_if(ok && ra < L, Q + ra * p.C + col);
      qb[q] = ld2_if(ok && rb < L, Q + rb * p.C + col);
#pragma unroll
      for (unsigned nt = 0; nt < 8; nt++)
        kn[q][nt] = ld2_if(ok && nt < ntiles && 8 * nt + l.g < L, K + (8 * nt + l.g) * p.C + col);
    }
#pragma unroll
    for (unsigned q = 0; q < 1; q++) {
      if (k0 + q < nks) {
        const float ak[4] = {ka[q].x, kb[q].x, ka[q].y, kb[q].y};
        const float aq[4] = {qa[q].x, qb[q].x, qa[q].y, qb[q].y};
        float akh[4], akl[4], aqh[4], aql[4];
        split_a(ak, akh, akl);
        split_a(aq, aqh, aql);
#pragma unroll
        for (unsigned nt = 0; nt < 8; nt++) {
          if (nt < ntiles) {
            float bh[2], bl[2];
            split(kn[q][nt].x, bh[0], bl[0]);
            split(kn[q][nt].y, bh[1], bl[1]);
            mma3(kk[nt], akh, akl, bh, bl);
            mma3(qk[nt], aqh, aql, bh, bl);
          }
        }
      }
    }
  }
#pragma unroll
  for (unsigned nt = 0; nt < 8; nt++) {
    if (nt < ntiles) {
      float m[4];
#pragma unroll
      for (unsigned e = 0; e < 4; e++) {
        const unsigned r = e < 2 ? ra : rb, c = 8 * nt + 2 * l.t + (e & 1);
        const bool lower = r < L && c <= r; /* c <= r < L */
        const float decay = lower ? expf(gs[r] - gs[c]) : 0.0f;
        m[e] = lower ? qk[nt][e] * decay : 0.0f;
        As[r * kLdA + c] = lower && c < r ? bs[r] * kk[nt][e] * decay : 0.0f;
      }
      *reinterpret_cast<float2 *>(rec + kRecM + ra * kCh + 8 * nt + 2 * l.t) = make_float2(m[0], m[1]);
      *reinterpret_cast<float2 *>(rec + kRecM + rb * kCh + 8 * nt + 2 * l.t) = make_float2(m[2], m[3]);
    }
  }
  __syncthreads();

  /* T = (I + A)^-1, column c by thread c: x_i = [i == c] - sum_{j<i} A_ij x_j, the column
   * kept in shared memory (Xs[i][c]: a warp's accesses fall in distinct banks), A rows
   * read as float4 broadcasts.  A at or above the diagonal is never read. */
  if (l.tid < kCh) {
    const unsigned c = l.tid;
#pragma unroll 1
    for (unsigned i = 0; i < kCh; i++) {
      const float *Ai = As + i * kLdA;
      float a0 = i == c ? 1.0f : 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
      unsigned jj = 0;
#pragma unroll 2
      for (; jj + 4 <= i; jj += 4) {
        const float4 a = *reinterpret_cast<const float4 *>(Ai + jj);
        a0 = fmaf(-a.x, Xs[jj * kCh + c], a0);
        a1 = fmaf(-a.y, Xs[(jj + 1) * kCh + c], a1);
        a2 = fmaf(-a.z, Xs[(jj + 2) * kCh + c], a2);
        a3 = fmaf(-a.w, Xs[(jj + 3) * kCh + c], a3);
      }
#pragma unroll 1
      for (; jj < i; jj++) a0 = fmaf(-Ai[jj], Xs[jj * kCh + c], a0);
      const float x = (a0 + a1) + (a2 + a3);
      Xs[i * kCh + c] = x;
      rec[kRecT + i * kCh + c] = x;
    }
  }
}

/* ---- phase 1: the chunks of one sequence in order ---------------------------------- */

/* NT 8-column tiles of value columns per block (4: 32 columns, 2: 16). */
template <unsigned NT>
__device__ __forceinline__ void scan_chunks(float *sm, bf16 *o, const float *qkv,
                                            const float *beta, float *state, const int *cu,
                                            const int *slots, const float *ws, const shape &p) {
  constexpr unsigned BV = 8 * NT;
  const unsigned nvs = (p.dv + BV - 1) / BV;
  const unsigned seq = blockIdx.x / (p.nv * nvs), rem = blockIdx.x % (p.nv * nvs);
  const unsigned h = rem / nvs, c0 = (rem % nvs) * BV; /* c0: first value column */
  if (seq >= p.s) return;
  const int ts = cu[seq], te = cu[seq + 1];
  if (ts < 0 || te <= ts) return; /* an empty sequence leaves its state as it was */
  const int slot = slots[seq];
  const unsigned kh = h / (p.nv / p.nk);
  float *Sg = slot < 0 ? nullptr : state + ((size_t)slot * p.nv + h) * p.dk * p.dv + c0;
  float *Ss = sm, *Es = Ss + kDk * kLd, *Ds = Es + kCh * kLd;
  float *eg = Ds + kCh * kLd, *ek = eg + kCh, *bs = ek + kCh;
  const lane_ids l = lanes();
  const unsigned nks = p.dk / 8;
  bool ntv[NT]; /* which of the block's 8-column tiles exist */
#pragma unroll
  for (unsigned nt = 0; nt < NT; nt++) ntv[nt] = c0 + 8 * nt < p.dv;

  /* Warp w holds S rows 32w..32w+31 (two 16-row tiles) x the block's BV columns. */
  float sacc[2][NT][4];
#pragma unroll
  for (unsigned mt = 0; mt < 2; mt++)
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
      for (unsigned hf = 0; hf < 2; hf++) {
        const unsigned m = 32 * l.w + 16 * mt + l.g + 8 * hf;
        const float2 v = ld2_if(Sg && m < p.dk && ntv[nt], Sg + (size_t)m * p.dv + 8 * nt + 2 * l.t);
        sacc[mt][nt][2 * hf] = v.x;
        sacc[mt][nt][2 * hf + 1] = v.y;
      }

  const unsigned ra = 16 * l.w + l.g, rb = ra + 8; /* this lane's token rows in b, c, d */
  const unsigned ktiles = 2 * l.w + 2;            /* k tiles of T and M up to the diagonal */
  const size_t nch = ((size_t)(te - ts) + kCh - 1) / kCh, chunk0 = first_chunk(cu, seq);
#pragma unroll 1
  for (size_t ci = 0; ci < nch; ci++) {
    const size_t t0 = (size_t)ts + ci * kCh;
    const unsigned L = (size_t)te - t0 < kCh ? (unsigned)((size_t)te - t0) : kCh;
    const float *rec = ws + ((chunk0 + ci) * p.nv + h) * kRec;
    const float *Q = qkv + t0 * p.C + (size_t)kh * p.dk;
    const float *K = qkv + t0 * p.C + (size_t)(p.nk + kh) * p.dk;
    const float *V = qkv + t0 * p.C + 2 * (size_t)p.nk * p.dk + (size_t)h * p.dv + c0;

    /* The next chunk's rows (q, k, this block's v columns) and workspace record go to L2
     * now, so that its loads wait on L2 rather than device memory. */
    if (ci + 1 < nch) {
      const size_t n0 = t0 + kCh;
      const unsigned ln = (size_t)te - n0 < kCh ? (unsigned)((size_t)te - n0) : kCh;
      const unsigned lk = (p.dk + 31) / 32, per = 2 * lk + 1; /* 128-byte lines per row */
      for (unsigned i = l.tid; i < ln * per; i += kBlock) {
        const unsigned r = i / per, c = i % per;
        const float *row = qkv + (n0 + r) * p.C;
        prefetch_l2(c < lk       ? row + (size_t)kh * p.dk + 32 * c
                    : c < 2 * lk ? row + (size_t)(p.nk + kh) * p.dk + 32 * (c - lk)
                                 : row + 2 * (size_t)p.nk * p.dk + (size_t)h * p.dv + c0);
      }
      for (unsigned i = l.tid; i < kRec / 32; i += kBlock) prefetch_l2(rec + p.nv * kRec + 32 * i);
    }

    /* a. decays and beta of the chunk; S into shared memory */
    const float Glast = rec[kRecG + L - 1];
    const float gL = expf(Glast);
    if (l.tid < kCh) {
      const bool in = l.tid < L;
      const float Gi = rec[kRecG + l.tid];
      eg[l.tid] = in ? expf(Gi) : 0.0f;
      ek[l.tid] = in ? expf(Glast - Gi) : 0.0f;
      bs[l.tid] = in ? beta[(t0 + l.tid) * p.nv + h] : 0.0f;
    }
#pragma unroll
    for (unsigned mt = 0; mt < 2; mt++)
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
        for (unsigned hf = 0; hf < 2; hf++) {
          const unsigned m = 32 * l.w + 16 * mt + l.g + 8 * hf;
          *reinterpret_cast<float2 *>(Ss + m * kLd + 8 * nt + 2 * l.t) =
              make_float2(sacc[mt][nt][2 * hf], sacc[mt][nt][2 * hf + 1]);
        }
    __syncthreads();

    /* b. E = diag(beta) (V - (K * e^G) S), rows 16w.. of the chunk */
    float acc[NT][4];
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) {
      const float2 va = ld2_if(ra < L && ntv[nt], V + ra * p.C + 8 * nt + 2 * l.t);
      const float2 vb = ld2_if(rb < L && ntv[nt], V + rb * p.C + 8 * nt + 2 * l.t);
      acc[nt][0] = va.x, acc[nt][1] = va.y, acc[nt][2] = vb.x, acc[nt][3] = vb.y;
    }
    rows_times_shared<NT>(acc, ra < L ? K + ra * p.C : nullptr, rb < L ? K + rb * p.C : nullptr,
                          -eg[ra], -eg[rb], Ss, nks, ntv, l);
    {
      const float ba = bs[ra], bb = bs[rb];
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++) {
        *reinterpret_cast<float2 *>(Es + ra * kLd + 8 * nt + 2 * l.t) =
            make_float2(acc[nt][0] * ba, acc[nt][1] * ba);
        *reinterpret_cast<float2 *>(Es + rb * kLd + 8 * nt + 2 * l.t) =
            make_float2(acc[nt][2] * bb, acc[nt][3] * bb);
      }
    }
    __syncthreads();

    /* c. D = T E (T is lower triangular: k tiles up to the diagonal) */
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    rows_times_shared<NT>(acc, rec + kRecT + ra * kCh, rec + kRecT + rb * kCh, 1.0f, 1.0f, Es,
                          ktiles, ntv, l);
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) {
      *reinterpret_cast<float2 *>(Ds + ra * kLd + 8 * nt + 2 * l.t) = make_float2(acc[nt][0], acc[nt][1]);
      *reinterpret_cast<float2 *>(Ds + rb * kLd + 8 * nt + 2 * l.t) = make_float2(acc[nt][2], acc[nt][3]);
    }
    __syncthreads();

    /* d. O = (Q * e^G) S + M D */
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    rows_times_shared<NT>(acc, ra < L ? Q + ra * p.C : nullptr, rb < L ? Q + rb * p.C : nullptr,
                          eg[ra], eg[rb], Ss, nks, ntv, l);
    rows_times_shared<NT>(acc, rec + kRecM + ra * kCh, rec + kRecM + rb * kCh, 1.0f, 1.0f, Ds,
                          ktiles, ntv, l);
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) {
      if (!ntv[nt]) continue;
#pragma unroll
      for (unsigned hf = 0; hf < 2; hf++) {
        const unsigned r = hf ? rb : ra;
        if (r < L) {
          const uint32_t pair = (uint32_t)f32_to_bf16(acc[nt][2 * hf]) |
                                ((uint32_t)f32_to_bf16(acc[nt][2 * hf + 1]) << 16);
          *reinterpret_cast<uint32_t *>(o + ((t0 + r) * p.nv + h) * p.dv + c0 + 8 * nt + 2 * l.t) = pair;
        }
      }
    }

    /* e. S = e^(G_L) S + (K * e^(G_L - G))^T D: rows of S are dk, k runs over tokens (the
     * k step's logical k = t, t + 4 are tokens 2t, 2t + 1, as for the B rows of Ds) */
#pragma unroll
    for (unsigned mt = 0; mt < 2; mt++)
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
        for (unsigned e = 0; e < 4; e++) sacc[mt][nt][e] *= gL;
    const unsigned kst = (L + 7) / 8;
#pragma unroll 1
    for (unsigned k0 = 0; k0 < kst; k0 += 4) {
      float kv[4][2][4]; /* [k step][m tile][a element], loaded before any product */
#pragma unroll
      for (unsigned q = 0; q < 4; q++) {
        const unsigned tk = 8 * (k0 + q) + 2 * l.t;
        const bool ia = k0 + q < kst && tk < L, ib = k0 + q < kst && tk + 1 < L;
#pragma unroll
        for (unsigned mt = 0; mt < 2; mt++) {
          const unsigned ma = 32 * l.w + 16 * mt + l.g, mb = ma + 8;
          kv[q][mt][0] = ia && ma < p.dk ? K[tk * p.C + ma] : 0.0f;
          kv[q][mt][1] = ia && mb < p.dk ? K[tk * p.C + mb] : 0.0f;
          kv[q][mt][2] = ib && ma < p.dk ? K[(tk + 1) * p.C + ma] : 0.0f;
          kv[q][mt][3] = ib && mb < p.dk ? K[(tk + 1) * p.C + mb] : 0.0f;
        }
      }
#pragma unroll
      for (unsigned q = 0; q < 4; q++) {
        if (k0 + q < kst) {
          const unsigned tk = 8 * (k0 + q) + 2 * l.t;
          const float ea = ek[tk], eb = ek[tk + 1];
          float bh[NT][2], bl[NT][2];
#pragma unroll
          for (unsigned nt = 0; nt < NT; nt++) b_shared(Ds, tk, nt, l.g, bh[nt], bl[nt]);
#pragma unroll
          for (unsigned mt = 0; mt < 2; mt++) {
            if (32 * l.w + 16 * mt < p.dk) {
              const float a[4] = {kv[q][mt][0] * ea, kv[q][mt][1] * ea, kv[q][mt][2] * eb,
                                  kv[q][mt][3] * eb};
              float ah[4], al[4];
              split_a(a, ah, al);
#pragma unroll
              for (unsigned nt = 0; nt < NT; nt++)
                if (ntv[nt]) mma3(sacc[mt][nt], ah, al, bh[nt], bl[nt]);
            }
          }
        }
      }
    }
    __syncthreads(); /* the next chunk rewrites Ss, eg, ek and bs */
  }

  if (Sg) {
#pragma unroll
    for (unsigned mt = 0; mt < 2; mt++)
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
        for (unsigned hf = 0; hf < 2; hf++) {
          const unsigned m = 32 * l.w + 16 * mt + l.g + 8 * hf;
          if (m < p.dk && ntv[nt])
            *reinterpret_cast<float2 *>(Sg + (size_t)m * p.dv + 8 * nt + 2 * l.t) =
                make_float2(sacc[mt][nt][2 * hf], sacc[mt][nt][2 * hf + 1]);
        }
  }
}
}  // namespace

/* The wrapper launches only shapes the contract allows; anything else does nothing. */
/* Three blocks per multiprocessor in phase 0 (168 registers), two in phase 1 at 16 columns. */
extern "C" __global__ void __launch_bounds__(kBlock, 3)
delta_rule_prefill_chunked(bf16 *o, const float *qkv, const float *g,
                                      const float *beta, float *state, const int *cu_seqlens,
                                      const int *slots, float *ws, unsigned s, unsigned nk,
                                      unsigned nv, unsigned dk, unsigned dv, unsigned phase) {
  __shared__ __align__(16) float sm[kSmem];
  if (s == 0 || nk == 0 || nv < nk || nv % nk != 0 || dk == 0 || dk > kDk || dk % 8 != 0 ||
      dv == 0 || dv % 8 != 0)
    return;
  shape p;
  p.s = s;
  p.nk = nk;
  p.nv = nv;
  p.dk = dk;
  p.dv = dv;
  p.C = 2 * (size_t)nk * dk + (size_t)nv * dv;
  if (phase == 0) {
    prep_chunk(sm, qkv, g, beta, cu_seqlens, ws, p);
  } else if (phase == 1) { /* 32 or 16 value columns per block, as the grid says */
    if (gridDim.x == s * nv * ((dv + 31) / 32))
      scan_chunks<4>(sm, o, qkv, beta, state, cu_seqlens, slots, ws, p);
    else if (gridDim.x == s * nv * ((dv + 15) / 16))
      scan_chunks<2>(sm, o, qkv, beta, state, cu_seqlens, slots, ws, p);
  }
}
MK_CHECK(delta_rule_prefill_chunked, gdn_chunked);

#endif
