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
 * T, M and G go to the workspace.  Phase 1, one block per (sequence, value head, 16 value
 * columns; two blocks per SM): the chunks of the sequence in order, the block's [dk, 16]
 * slice of S kept in mma accumulators from the first chunk to the last, so the state is
 * read and written once per sequence.  A chunk step's operands that do not depend on S are
 * loaded ahead of their use (see scan_chunks).
 *
 * Products are mma.sync m16n8k8 with f32 accumulation and every f32 operand split into
 * a tf32 part and a remainder the tensor core reads as tf32 (three products per tile: about
 * f32 accuracy, see split and mma3); the state, the
 * decays and every sum stay f32.  Inside each 8-wide k step
 * the logical k = t and t + 4 of lane (g = lane/4, t = lane%4) are the memory columns 2t
 * and 2t + 1: A fragments then come from global (or shared) memory as float2, and B
 * fragments from shared rows of stride 20 floats without bank conflicts.
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
constexpr unsigned kLdA = 68; /* row stride of A in phase 0: 16-byte rows */

/* Workspace record of one (chunk, value head): T [64,64], M [64,64], G [64] (f32). */
constexpr size_t kRecT = 0, kRecM = (size_t)kCh * kCh, kRecG = 2 * (size_t)kCh * kCh;
constexpr size_t kRec = 2 * (size_t)kCh * kCh + kCh;
static_assert(kRec * 4 == 33024, "kernels.def states the record size");

/* Phase 1 with NT 8-column tiles of value columns per block (NT = 2): B operands (S, E, D)
 * sit in shared rows of stride 8 NT + 4 floats (a lane's (8 k + 2 t) row and g column fall
 * in distinct banks).  The chunk's T and M also go to shared memory, only the 16-row tiles
 * up to the diagonal (kTri floats each; warp w's rows at tri_off(w) with stride 16 w + 24,
 * which keeps the float2 A-fragment reads conflict-free). */
constexpr unsigned kTri = 3072;
template <unsigned NT> struct layout1 {
  static constexpr unsigned LD = 8 * NT + 4;
  static constexpr unsigned S = 0, E = S + kDk * LD, D = E + kCh * LD, V = D + kCh * LD;
  static constexpr unsigned T = V + 3 * kCh, M = T + kTri, end = M + kTri;
  static_assert(T % 4 == 0 && M % 4 == 0, "16-byte copies into T and M");
};
__device__ __forceinline__ unsigned tri_off(unsigned w) { return 128 * w * (w + 2); }
__device__ __forceinline__ unsigned tri_ld(unsigned w) { return 16 * w + 24; }

/* Shared memory (floats): phase 0 uses g, beta, A and T's columns; phase 1 the layout above. */
constexpr unsigned kSmem0 = 2 * kCh + kCh * kLdA + kCh * kCh;
constexpr unsigned kSmem = kSmem0 > layout1<2>::end ? kSmem0 : layout1<2>::end;
static_assert(kSmem * 4 <= 48 * 1024, "static shared memory of one block");

#ifndef GDN_CHUNKED_EMULATED /* a host emulation supplies these two */
__device__ __forceinline__ float tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

/* d += a b on one 16x8x8 tile; the tensor core uses the top 19 bits (tf32) of a and b. */
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

/* Asynchronous global -> shared copies of N bytes (8 or 16); cp_async_wait() waits for all
 * of this thread's. */
template <unsigned N> __device__ __forceinline__ void cp_async(float *dst, const float *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  if (N == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
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

/* x = hi + lo with hi a tf32 value: the pair keeps about 21 significant bits.  Unless RN,
 * lo stays in f32: the tensor core reads only the top 19 bits of a .tf32 operand (it
 * truncates lo to 11 significant bits), and rounding lo costs two more instructions per
 * operand - splits are most of phase 1's instructions - for one bit. */
template <bool RN = false>
__device__ __forceinline__ void split(float x, float &hi, float &lo) {
  hi = tf32(x);
  lo = RN ? tf32(x - hi) : x - hi;
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

template <bool RN = false>
__device__ __forceinline__ void split_a(const float a[4], float ah[4], float al[4]) {
#pragma unroll
  for (unsigned i = 0; i < 4; i++) split<RN>(a[i], ah[i], al[i]);
}

/* B fragment of 8-column tile nt from shared rows col, col + 1 (stride LD). */
template <unsigned LD, bool RN = false>
__device__ __forceinline__ void b_shared(const float *Bs, unsigned col, unsigned nt, unsigned g,
                                         float bh[2], float bl[2]) {
  split<RN>(Bs[col * LD + 8 * nt + g], bh[0], bl[0]);
  split<RN>(Bs[(col + 1) * LD + 8 * nt + g], bh[1], bl[1]);
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

/* acc[nt] += A B for a warp's 16-row tile (this lane's rows pa, pb, in shared memory)
 * times B in shared memory (k rows, the block's NT 8-column tiles), over k steps [0, nks).
 * lo parts rounded here: with them in f32 ptxas spills (the state update's K^T operands
 * are live across this product). */
template <unsigned NT, unsigned LD>
__device__ __forceinline__ void shared_rows_times_shared(float acc[NT][4], const float *pa,
                                                         const float *pb, const float *Bs,
                                                         unsigned nks, const bool ntv[NT],
                                                         const lane_ids &l) {
#pragma unroll 2
  for (unsigned k = 0; k < nks; k++) {
    const unsigned col = 8 * k + 2 * l.t;
    const float2 x = *reinterpret_cast<const float2 *>(pa + col);
    const float2 y = *reinterpret_cast<const float2 *>(pb + col);
    const float a[4] = {x.x, y.x, x.y, y.y};
    float ah[4], al[4];
    split_a<true>(a, ah, al);
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) {
      if (ntv[nt]) {
        float bh[2], bl[2];
        b_shared<LD, true>(Bs, col, nt, l.g, bh, bl);
        mma3(acc[nt], ah, al, bh, bl);
      }
    }
  }
}

/* ae += (K rows * ska, skb) S and ao += (Q rows * sqa, sqb) S in one pass over the k steps
 * [0, nks) (two independent products per B fragment).  ck, cq hold the first four k steps'
 * rows on entry (loaded a chunk step ahead); the next four are in flight while the current
 * four are multiplied. */
template <unsigned NT, unsigned LD>
__device__ __forceinline__ void kq_times_state(float ae[NT][4], float ao[NT][4], float2 ck[4][2],
                                               float2 cq[4][2], const float *ka, const float *kb,
                                               const float *qa, const float *qb, float ska,
                                               float skb, float sqa, float sqb, const float *Ss,
                                               unsigned nks, const bool ntv[NT], const lane_ids &l) {
#pragma unroll 1
  for (unsigned k0 = 0; k0 < nks; k0 += 4) {
    float2 nk[4][2], nq[4][2];
    load_rows(nk, ka, kb, k0 + 4, nks, l.t);
    load_rows(nq, qa, qb, k0 + 4, nks, l.t);
#pragma unroll
    for (unsigned q = 0; q < 4; q++) {
      if (k0 + q < nks) {
        const unsigned col = 8 * (k0 + q) + 2 * l.t;
        const float a[4] = {ck[q][0].x * ska, ck[q][1].x * skb, ck[q][0].y * ska, ck[q][1].y * skb};
        const float b[4] = {cq[q][0].x * sqa, cq[q][1].x * sqb, cq[q][0].y * sqa, cq[q][1].y * sqb};
        float ah[4], al[4], bh4[4], bl4[4];
        split_a(a, ah, al);
        split_a(b, bh4, bl4);
#pragma unroll
        for (unsigned nt = 0; nt < NT; nt++) {
          if (ntv[nt]) {
            float bh[2], bl[2];
            b_shared<LD>(Ss, col, nt, l.g, bh, bl);
            mma3(ae[nt], ah, al, bh, bl);
            mma3(ao[nt], bh4, bl4, bh, bl);
          }
        }
      }
    }
#pragma unroll
    for (unsigned q = 0; q < 4; q++) {
      ck[q][0] = nk[q][0], ck[q][1] = nk[q][1];
      cq[q][0] = nq[q][0], cq[q][1] = nq[q][1];
    }
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

/* NT 8-column tiles of value columns per block (2: 16 columns, two blocks per SM).  What a
 * chunk step needs that does not depend on S is asked for before the step that uses it, so
 * that the recurrence waits on global memory as little as possible: G, beta and the first
 * four k steps of the K and Q rows one step ahead, T and M by asynchronous copies at the
 * step's start, V and the K^T operands of the state update before the products that
 * precede their use. */
template <unsigned NT>
__device__ __forceinline__ void scan_chunks(float *sm, bf16 *o, const float *qkv,
                                            const float *beta, float *state, const int *cu,
                                            const int *slots, const float *ws, const shape &p) {
  using Y = layout1<NT>;
  constexpr unsigned BV = 8 * NT, LD = Y::LD;
  const unsigned nvs = (p.dv + BV - 1) / BV;
  const unsigned seq = blockIdx.x / (p.nv * nvs), rem = blockIdx.x % (p.nv * nvs);
  const unsigned h = rem / nvs, c0 = (rem % nvs) * BV; /* c0: first value column */
  if (seq >= p.s) return;
  const int ts = cu[seq], te = cu[seq + 1];
  if (ts < 0 || te <= ts) return; /* an empty sequence leaves its state as it was */
  const int slot = slots[seq];
  const unsigned kh = h / (p.nv / p.nk);
  float *Sg = slot < 0 ? nullptr : state + ((size_t)slot * p.nv + h) * p.dk * p.dv + c0;
  float *Ss = sm + Y::S, *Es = sm + Y::E, *Ds = sm + Y::D;
  float *eg = sm + Y::V, *ek = eg + kCh, *bs = ek + kCh;
  float *Ts = sm + Y::T, *Ms = sm + Y::M;
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
  const size_t qoff = (size_t)kh * p.dk, koff = (size_t)(p.nk + kh) * p.dk;
  const size_t voff = 2 * (size_t)p.nk * p.dk + (size_t)h * p.dv + c0;
  const bool a16 = (reinterpret_cast<uintptr_t>(ws) & 15) == 0; /* records are 16-byte multiples */

  /* Chunk 0's G, beta and first K, Q rows; later ones are loaded a step ahead. */
  float pG = 0.0f, pB = 0.0f, pGL;
  float2 ck[4][2], cq[4][2];
  {
    const unsigned L0 = (size_t)(te - ts) < kCh ? (unsigned)(te - ts) : kCh;
    const float *rec0 = ws + (chunk0 * p.nv + h) * kRec;
    const float *row = qkv + (size_t)ts * p.C;
    pGL = rec0[kRecG + L0 - 1];
    if (l.tid < L0) {
      pG = rec0[kRecG + l.tid];
      pB = beta[((size_t)ts + l.tid) * p.nv + h];
    }
    load_rows(ck, ra < L0 ? row + ra * p.C + koff : nullptr, rb < L0 ? row + rb * p.C + koff : nullptr,
              0, nks, l.t);
    load_rows(cq, ra < L0 ? row + ra * p.C + qoff : nullptr, rb < L0 ? row + rb * p.C + qoff : nullptr,
              0, nks, l.t);
  }

#pragma unroll 1
  for (size_t ci = 0; ci < nch; ci++) {
    const size_t t0 = (size_t)ts + ci * kCh;
    const unsigned L = (size_t)te - t0 < kCh ? (unsigned)((size_t)te - t0) : kCh;
    const float *rec = ws + ((chunk0 + ci) * p.nv + h) * kRec;
    const float *row = qkv + t0 * p.C;
    const float *Q = row + qoff, *K = row + koff, *V = row + voff;
    const bool more = ci + 1 < nch;
    const size_t n0 = t0 + kCh; /* the next chunk, when there is one */
    const unsigned Ln = !more ? 0 : (size_t)te - n0 < kCh ? (unsigned)((size_t)te - n0) : kCh;

    /* a. T and M start their way to shared memory (the tiles up to the diagonal); the
     * next chunk's rows and record go to L2; decays and beta of this chunk from the
     * registers loaded a step ago, the next chunk's asked for; S into shared memory. */
    {
      const unsigned per = a16 ? 4 : 2, cpr = kCh / per; /* floats per copy, copies per row */
      for (unsigned i = l.tid; i < 2 * kCh * cpr; i += kBlock) {
        const unsigned mtx = i / (kCh * cpr), r = (i / cpr) % kCh, c = i % cpr, w = r / 16;
        if (c * per < 16 * (w + 1)) {
          float *dst = (mtx ? Ms : Ts) + tri_off(w) + (r % 16) * tri_ld(w) + c * per;
          const float *src = rec + (mtx ? kRecM : kRecT) + r * kCh + c * per;
          if (a16)
            cp_async<16>(dst, src);
          else
            cp_async<8>(dst, src);
        }
      }
    }
    if (more) {
      const unsigned lk = (p.dk + 31) / 32, per = 2 * lk + 1; /* 128-byte lines per row */
      for (unsigned i = l.tid; i < Ln * per; i += kBlock) {
        const unsigned r = i / per, c = i % per;
        const float *nrow = qkv + (n0 + r) * p.C;
        prefetch_l2(c < lk       ? nrow + qoff + 32 * c
                    : c < 2 * lk ? nrow + koff + 32 * (c - lk)
                                 : nrow + voff);
      }
      for (unsigned i = l.tid; i < kRec / 32; i += kBlock) prefetch_l2(rec + p.nv * kRec + 32 * i);
    }
    const float gL = expf(pGL);
    if (l.tid < kCh) {
      const bool in = l.tid < L;
      eg[l.tid] = in ? expf(pG) : 0.0f;
      ek[l.tid] = in ? expf(pGL - pG) : 0.0f;
      bs[l.tid] = in ? pB : 0.0f;
    }
    if (more) {
      const float *nrec = rec + p.nv * kRec;
      pGL = nrec[kRecG + Ln - 1];
      if (l.tid < Ln) {
        pG = nrec[kRecG + l.tid];
        pB = beta[(n0 + l.tid) * p.nv + h];
      }
    }
#pragma unroll
    for (unsigned mt = 0; mt < 2; mt++)
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
        for (unsigned hf = 0; hf < 2; hf++) {
          const unsigned m = 32 * l.w + 16 * mt + l.g + 8 * hf;
          *reinterpret_cast<float2 *>(Ss + m * LD + 8 * nt + 2 * l.t) =
              make_float2(sacc[mt][nt][2 * hf], sacc[mt][nt][2 * hf + 1]);
        }
    float2 va[NT], vb[NT]; /* added after the products: nothing waits on them */
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) {
      va[nt] = ld2_if(ra < L && ntv[nt], V + ra * p.C + 8 * nt + 2 * l.t);
      vb[nt] = ld2_if(rb < L && ntv[nt], V + rb * p.C + 8 * nt + 2 * l.t);
    }
    __syncthreads();

    /* b. E = diag(beta) (V - (K * e^G) S) and, in the same pass, O = (Q * e^G) S, rows
     * 16w.. of the chunk */
    float ae[NT][4], ao[NT][4];
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
      for (unsigned e = 0; e < 4; e++) ae[nt][e] = ao[nt][e] = 0.0f;
    kq_times_state<NT, LD>(ae, ao, ck, cq, ra < L ? K + ra * p.C : nullptr,
                           rb < L ? K + rb * p.C : nullptr, ra < L ? Q + ra * p.C : nullptr,
                           rb < L ? Q + rb * p.C : nullptr, -eg[ra], -eg[rb], eg[ra], eg[rb], Ss,
                           nks, ntv, l);

    /* The state update's A operands (K^T of this chunk: dk rows 32w.., tokens 2t, 2t + 1
     * of each k step), asked for now and used after c and d. */
    float kv[8][2][4];
#pragma unroll
    for (unsigned q = 0; q < 8; q++) {
      const unsigned tk = 8 * q + 2 * l.t;
      const bool ia = tk < L, ib = tk + 1 < L;
#pragma unroll
      for (unsigned mt = 0; mt < 2; mt++) {
        const unsigned ma = 32 * l.w + 16 * mt + l.g, mb = ma + 8;
        kv[q][mt][0] = ia && ma < p.dk ? __ldg(K + tk * p.C + ma) : 0.0f;
        kv[q][mt][1] = ia && mb < p.dk ? __ldg(K + tk * p.C + mb) : 0.0f;
        kv[q][mt][2] = ib && ma < p.dk ? __ldg(K + (tk + 1) * p.C + ma) : 0.0f;
        kv[q][mt][3] = ib && mb < p.dk ? __ldg(K + (tk + 1) * p.C + mb) : 0.0f;
      }
    }
    {
      const float ba = bs[ra], bb = bs[rb];
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++) {
        *reinterpret_cast<float2 *>(Es + ra * LD + 8 * nt + 2 * l.t) =
            make_float2((ae[nt][0] + va[nt].x) * ba, (ae[nt][1] + va[nt].y) * ba);
        *reinterpret_cast<float2 *>(Es + rb * LD + 8 * nt + 2 * l.t) =
            make_float2((ae[nt][2] + vb[nt].x) * bb, (ae[nt][3] + vb[nt].y) * bb);
      }
    }
    cp_async_wait();
    __syncthreads();

    /* c. D = T E (T is lower triangular: k tiles up to the diagonal) */
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) ae[nt][0] = ae[nt][1] = ae[nt][2] = ae[nt][3] = 0.0f;
    {
      const float *ta = Ts + tri_off(l.w) + l.g * tri_ld(l.w);
      shared_rows_times_shared<NT, LD>(ae, ta, ta + 8 * tri_ld(l.w), Es, ktiles, ntv, l);
    }
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) {
      *reinterpret_cast<float2 *>(Ds + ra * LD + 8 * nt + 2 * l.t) = make_float2(ae[nt][0], ae[nt][1]);
      *reinterpret_cast<float2 *>(Ds + rb * LD + 8 * nt + 2 * l.t) = make_float2(ae[nt][2], ae[nt][3]);
    }
    __syncthreads();

    /* d. O += M D */
    {
      const float *ma = Ms + tri_off(l.w) + l.g * tri_ld(l.w);
      shared_rows_times_shared<NT, LD>(ao, ma, ma + 8 * tri_ld(l.w), Ds, ktiles, ntv, l);
    }
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) {
      if (!ntv[nt]) continue;
#pragma unroll
      for (unsigned hf = 0; hf < 2; hf++) {
        const unsigned r = hf ? rb : ra;
        if (r < L) {
          const uint32_t pair = (uint32_t)f32_to_bf16(ao[nt][2 * hf]) |
                                ((uint32_t)f32_to_bf16(ao[nt][2 * hf + 1]) << 16);
          *reinterpret_cast<uint32_t *>(o + ((t0 + r) * p.nv + h) * p.dv + c0 + 8 * nt + 2 * l.t) = pair;
        }
      }
    }

    /* The next chunk's first K and Q rows, in flight during e and the next step's a. */
    if (more) {
      const float *nrow = row + kCh * p.C;
      load_rows(ck, ra < Ln ? nrow + ra * p.C + koff : nullptr,
                rb < Ln ? nrow + rb * p.C + koff : nullptr, 0, nks, l.t);
      load_rows(cq, ra < Ln ? nrow + ra * p.C + qoff : nullptr,
                rb < Ln ? nrow + rb * p.C + qoff : nullptr, 0, nks, l.t);
    }

    /* e. S = e^(G_L) S + (K * e^(G_L - G))^T D: rows of S are dk, k runs over tokens (the
     * k step's logical k = t, t + 4 are tokens 2t, 2t + 1, as for the B rows of Ds) */
#pragma unroll
    for (unsigned mt = 0; mt < 2; mt++)
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
        for (unsigned e = 0; e < 4; e++) sacc[mt][nt][e] *= gL;
#pragma unroll
    for (unsigned q = 0; q < 8; q++) {
      if (8 * q < L) {
        const unsigned tk = 8 * q + 2 * l.t;
        const float ea = ek[tk], eb = ek[tk + 1];
        float bh[NT][2], bl[NT][2];
#pragma unroll
        for (unsigned nt = 0; nt < NT; nt++) b_shared<LD>(Ds, tk, nt, l.g, bh[nt], bl[nt]);
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
    __syncthreads(); /* the next chunk rewrites Ss, eg, ek, bs, T and M */
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
/* Three blocks per multiprocessor in phase 0 (168 registers), two in phase 1 (256 blocks). */
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
  } else if (phase == 1 && gridDim.x == s * nv * ((dv + 15) / 16)) { /* 16 value columns a block */
    scan_chunks<2>(sm, o, qkv, beta, state, cu_seqlens, slots, ws, p);
  }
}
MK_CHECK(delta_rule_prefill_chunked, gdn_chunked);

#endif
