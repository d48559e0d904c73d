/* gdn_chunked module: the gated delta rule prefill in chunks of 64 tokens, on tensor cores.
 *
 * For one value head and a chunk of L <= 64 tokens with in-chunk cumulative log decay G
 * (G_i = g_0 + ... + g_i) the token recurrence of delta_rule_prefill rearranges into
 *   A = strictly_lower(beta_i (k_i.k_j) e^(G_i - G_j)),  T = (I + A)^-1
 *   M = lower_with_diagonal((q_i.k_j) e^(G_i - G_j))
 *   W = T diag(beta) (K * e^G),  U = T diag(beta) V            (the WY factors)
 * and, from the state S at the chunk start,
 *   D = U - W S                            the corrections d_i of the chunk's tokens
 *   O = (Q * e^G) S + M D
 *   S = e^(G_L) S + (K * e^(G_L - G))^T D
 * Every exponent is of a difference G_i - G_j with j <= i, or of G itself, so nothing
 * overflows however strong the decay.
 *
 * Phase 0, one block per (chunk, value head), all chunks at once, does everything that
 * does not depend on S: G, K K^T and Q K^T, A, M, T = (I + A)^-1 in 16x16 blocks, W and U, and
 * writes -W, Qs = Q e^G, Kd^T = (K e^(G_L - G))^T and M as ready-made A fragments of
 * mma.sync m16n8k16 (see the record below), U in f32 and e^(G_L).  Phase 1, one block per
 * (sequence, value head, 16 or 32 value columns), walks the chunks in order with the
 * block's [dk, cols] slice of S in mma accumulators; a chunk step only loads fragments
 * and multiplies (D = U + (-W) S, O = Qs S + M D, S = e^(G_L) S + Kd^T D).
 *
 * Accuracy: phase 0's products are mma.sync m16n8k8 tf32 with every operand split in two
 * (three products per tile); phase 1's operands are split into two bf16 parts,
 * x = hi + lo (hi = bf16(x), lo = bf16(x - hi): about 17 significant bits), and each tile
 * product is hi*hi + hi*lo + lo*hi on m16n8k16 bf16 with f32 accumulation (about 2^-17
 * relative per product).  Plain tf32 or bf16 products (2^-11, 2^-8) are not enough: their
 * rounding noise, amplified by the gated norm on heads whose output nearly cancels, moves
 * the layer output by 1e-3 between runs whose inputs differ in the last bits.  The state,
 * decays and every sum stay f32.  Phase 1's A operands are split once, in phase 0, and
 * stored as the fragment registers themselves; its B operands (S, D) are split once per
 * chunk step by the block into shared memory.
 *
 * delta_rule_prefill_chunked_f16 (sm_90a) trades that accuracy for speed, as its manifest
 * row states: phase 0 (prep_chunk<true>) writes -W, Qs, Kd^T and M as one IEEE half plane
 * each (K K^T, Q K^T, W and U by one product of half operands, V scaled into half's range
 * for U, which is stored f32), and phase 1 (gdn_chunked_wg16.cuh) multiplies fp16 operands once,
 * with S, U, D and O kept times a power of two per chunk so that half's range holds them.
 * Unlike plain tf32 everywhere (the first version, which failed the layer tests), it keeps
 * the inverse, the decays and every sum f32, and passes them: fixture outputs as before,
 * recurrent states ~4e-4 relative from transformers' (docs/numerics.md; U's split products
 * bought 10-20 % of that error).
 *
 * The mma.sync kernels are CUDA only (inline PTX).  The HIP build (AMD GPUs) gets
 * delta_rule_prefill_chunked alone, from gdn_chunked_fma.cuh: the same op, chunks and
 * workspace size on plain f32 FMAs, as the Vulkan shader computes it (tests/unit/
 * test_chunked_fma.c runs that source on the host; no AMD GPU has run it). */
#include "common.cuh"
#include "metrale/kernel_bounds.h"

#if !defined(__HIP_PLATFORM_AMD__)
#include "sm80.cuh"
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "sm90a.cuh"
#include "tma_templates.h"
extern "C" {
/* The tensor-map templates the CUDA backend writes when it loads this module (tma_templates.h),
 * and v's map an SM of delta_rule_prefill_chunked_wh and _wh_seg (gdn_chunked_wh.cuh). */
__device__ __align__(128) unsigned char metrale_tma_templates[METRALE_TMA_COUNT][METRALE_TMA_BYTES];
__device__ __align__(128) unsigned char metrale_gdn_wh_maps[1024][METRALE_TMA_BYTES];
}
#endif

namespace {
constexpr unsigned kBlock = mk_block("delta_rule_prefill_chunked");
static_assert(kBlock == 128, "the chunked delta rule is written for 4 warps of 32 lanes");
constexpr unsigned kCh = 64;  /* tokens per chunk */
constexpr unsigned kDk = 128; /* largest key head dim */
constexpr unsigned kDv = 128; /* largest value head dim */
constexpr float kLog2e = 1.4426950408889634f; /* G log2(e): e^G = 2^(G log2(e)) */
constexpr unsigned kLdA = 68; /* row stride of A, T and the slabs in phase 0 */
constexpr unsigned kLdS = 136; /* row stride of phase 0's staged K and Q (8-byte reads of rows
                                  g, columns 2t: distinct banks in each half warp) */

/* Workspace record of one (chunk, value head), in 32-bit words.  A region holds a matrix
 * of nm x nk tiles of 16x16 (m: rows / 16, k: columns / 16) as two planes, the hi then the
 * lo bf16 parts, each tile's plane 512 bytes at (k nm + m) in its plane, in the canonical
 * layout of a K-major wgmma operand: four 8x8 core matrices of 128 bytes (8 rows of 8
 * columns), rows 8..15 256 bytes on, columns 8..15 128 bytes on.  So the m64 x k16 block
 * of four row tiles at one k is 2 KB of uniform strides (wgmma reads it from shared
 * memory), and a lane's mma.m16n8k16 A fragment is one word of each core matrix a plane.
 *   -W    [64 tokens, 128 dk]: tiles (m = token/16, k = dk/16), nm = 4, at kRecW
 *   Qs    [64 tokens, 128 dk]: likewise at kRecQ
 *   Kd^T  [128 dk, 64 tokens]: tiles (m = dk/16, k = token/16), nm = 8, at kRecK
 *   M     [64, 64]: tiles (m, k), nm = 4, at kRecM (zero above the diagonal)
 *   U     f32 [64 tokens, 128 value columns] at kRecU; e^(G_L) f32 at kRecG.
 * The record is a whole number of 128-byte lines.
 * Rows past the chunk's L tokens and columns past dk are zero, Kd^T's rows past dk too;
 * Qs' tiles wholly past dk are not written, nor -W's past its K slabs (the 64-column
 * slabs that cover dk); phase 1 reads neither. */
constexpr size_t kTile = 256;
constexpr size_t kRecW = 0, kRecQ = kRecW + 32 * kTile, kRecK = kRecQ + 32 * kTile;
constexpr size_t kRecM = kRecK + 32 * kTile, kRecU = kRecM + 16 * kTile;
constexpr size_t kRecG = kRecU + (size_t)kCh * kDv, kRec = kRecG + 32; /* 128-byte lines */
static_assert(kRec * 4 == 147584, "kernels.def states the record size");

/* Phase 1 with NT 8-column tiles of value columns per block (2 or 4): S and D as packed
 * (hi, lo) bf16 words in shared memory, transposed ([column][k], strides 136 and 72: a
 * lane's two 8-byte reads (column g, k 2t..) fall in distinct banks). */
template <unsigned NT> struct layout1 {
  static constexpr unsigned BV = 8 * NT, LS = kDk + 8, LD = kCh + 8;
  static constexpr unsigned S = 0, D = S + BV * LS, end = D + BV * LD;
};

/* Shared memory (words): phase 0 uses G, beta and three scale rows, then the chunk's K and Q
 * (for K K^T and Q K^T), in whose place come A (then the slabs), T and its split fragments;
 * phase 1 the layout above.  Dynamic shared memory (kernels.def's rows state its size). */
constexpr unsigned kSmem0 = 5 * kCh + 2 * kCh * kLdS;
static_assert(2 * kCh * kLdA + 2 * kCh * kCh <= 2 * kCh * kLdS, "A, T and its hi and lo fragments fit where K and Q were");
constexpr unsigned kSmem = kSmem0 > layout1<4>::end ? kSmem0 : layout1<4>::end;
static_assert(layout1<2>::end <= kSmem, "phase 1's layouts fit");

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

/* IEEE half(x0) in the low half, half(x1) in the high half, rounded to nearest even. */
__device__ __forceinline__ uint32_t f16x2_rn(float x0, float x1) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
  return r;
}

__device__ __forceinline__ void prefetch_l2(const void *ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
}

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

/* x = hi + lo with hi = x's top 19 bits (what the tensor core reads of a .tf32 operand) and
 * lo = x - hi, exact: one LOP3 where split's round-to-nearest is emulated on sm_90.  The pair
 * keeps about 20 significant bits (lo, read as tf32, loses its own bits below 11) against
 * split's 21-22. */
__device__ __forceinline__ void split_trunc(float x, float &hi, float &lo) {
  hi = __uint_as_float(__float_as_uint(x) & 0xffffe000u);
  lo = x - hi;
}

template <bool RN = false>
__device__ __forceinline__ void split_a(const float a[4], float ah[4], float al[4]) {
#pragma unroll
  for (unsigned i = 0; i < 4; i++) split<RN>(a[i], ah[i], al[i]);
}

/* x = hi + lo in bf16 for x0 (low halves) and x1 (high halves). */
__device__ __forceinline__ void split2(float x0, float x1, uint32_t &hi, uint32_t &lo) {
  hi = bf16x2_rn(x0, x1);
  lo = bf16x2_rn(x0 - bf16_lo(hi), x1 - bf16_hi(hi));
}

/* Tile (m, k) of a record region with nm row tiles: word offset of its hi plane (the lo
 * plane is kPlane words on), and of this lane's fragment register i in a tile's plane. */
constexpr unsigned kPlane = 32 * kTile / 2; /* words of a region's plane (16 KB) */
__device__ __forceinline__ size_t tile_off(unsigned nm, unsigned m, unsigned k) {
  return (size_t)(k * nm + m) * (kTile / 2);
}
__device__ __forceinline__ unsigned frag_word(unsigned lane, unsigned i) {
  return (i & 1u) * 64u + (i >> 1) * 32u + (lane >> 2) * 4u + (lane & 3u);
}

/* An A fragment tile of mma.sync m16n8k16 from two m16n8 accumulator tiles c0 (columns
 * 0-7) and c1 (8-15) of this lane, times sc, stored as the record's tile (m, k) of a
 * region with nm row tiles and plane stride plane words.  F16 (the records of
 * delta_rule_prefill_chunked_f16): the hi plane holds IEEE half values, the lo plane is
 * neither written nor read. */
template <bool F16 = false>
__device__ __forceinline__ void put_acc_tile(uint32_t *region, unsigned nm, unsigned plane,
                                             unsigned m, unsigned k, unsigned lane,
                                             const float c0[4], const float c1[4], float sc) {
  uint32_t *t = region + tile_off(nm, m, k);
  if (F16) {
    t[frag_word(lane, 0)] = f16x2_rn(sc * c0[0], sc * c0[1]);
    t[frag_word(lane, 1)] = f16x2_rn(sc * c0[2], sc * c0[3]);
    t[frag_word(lane, 2)] = f16x2_rn(sc * c1[0], sc * c1[1]);
    t[frag_word(lane, 3)] = f16x2_rn(sc * c1[2], sc * c1[3]);
    return;
  }
  uint32_t h[4], lo[4];
  split2(sc * c0[0], sc * c0[1], h[0], lo[0]);
  split2(sc * c0[2], sc * c0[3], h[1], lo[1]);
  split2(sc * c1[0], sc * c1[1], h[2], lo[2]);
  split2(sc * c1[2], sc * c1[3], h[3], lo[3]);
#pragma unroll
  for (unsigned i = 0; i < 4; i++) {
    t[frag_word(lane, i)] = h[i];
    t[plane + frag_word(lane, i)] = lo[i];
  }
}

struct frag {
  uint32_t h[4], l[4];
};
__device__ __forceinline__ frag ld_tile(const uint32_t *region, unsigned nm, unsigned plane,
                                        unsigned m, unsigned k, unsigned lane) {
  const uint32_t *t = region + tile_off(nm, m, k);
  frag f;
#pragma unroll
  for (unsigned i = 0; i < 4; i++) {
    f.h[i] = __ldg(t + frag_word(lane, i));
    f.l[i] = __ldg(t + plane + frag_word(lane, i));
  }
  return f;
}
/* The four regions: row tiles and plane stride */
#define REC_W 4, kPlane
#define REC_Q 4, kPlane
#define REC_K 8, kPlane
#define REC_M 4, kPlane / 2

/* Packed (hi, lo) words of x0 at (column n, k) and x1 at (n + 1, k), stride ld. */
__device__ __forceinline__ void put_pair_t(uint32_t *base, unsigned ld, unsigned n, unsigned k,
                                           float x0, float x1) {
  uint32_t h, lo;
  split2(x0, x1, h, lo);
  base[n * ld + k] = __byte_perm(h, lo, 0x5410);
  base[(n + 1) * ld + k] = __byte_perm(h, lo, 0x7632);
}

/* B fragment (k 2t, 2t + 1 and 2t + 8, 2t + 9 of a 16-row step) of column row `col`. */
__device__ __forceinline__ void b_frag(const uint32_t *col, unsigned t, uint32_t bh[2],
                                       uint32_t bl[2]) {
  const uint2 x = *reinterpret_cast<const uint2 *>(col + 2 * t);
  const uint2 y = *reinterpret_cast<const uint2 *>(col + 8 + 2 * t);
  bh[0] = __byte_perm(x.x, x.y, 0x5410);
  bl[0] = __byte_perm(x.x, x.y, 0x7632);
  bh[1] = __byte_perm(y.x, y.y, 0x5410);
  bl[1] = __byte_perm(y.x, y.y, 0x7632);
}

/* d += a b close to f32 is three products, lo*hi, hi*lo, hi*hi (pass 0, 1, 2; lo*lo is
 * below the split's own error), each tile's a pass apart so that independent mma fill
 * the latency between them. */
__device__ __forceinline__ void mma_part(float d[4], const frag &a, const uint32_t bh[2],
                                         const uint32_t bl[2], unsigned pass) {
  sm80::mma16816(d, pass == 0 ? a.l : a.h, pass == 1 ? bl : bh);
}

/* ---- phase 0: everything of one chunk that does not depend on S -------------------- */

/* acc[nt] += A B[:, 8 nt .. 8 nt + 8) for a 16x16 block A and a 16-row block B, both of stride
 * kLdA in shared memory (the blocked inverse's product): two k steps of mma m16n8k8 per 8
 * columns, every operand split in two tf32 parts by truncation (split_trunc; mma3: close to f32,
 * phase 0's products' class).
 * Lane (g, t): A's rows g and g + 8 at columns t and t + 4 of a k step (one bank each), B's rows t
 * and t + 4 at column g; acc[nt] its C fragment, rows g and g + 8 at columns 8 nt + 2t, + 1. */
__device__ __forceinline__ void block16_product(float (&acc)[2][4], const float *A, const float *B, unsigned g,
                                                unsigned t) {
#pragma unroll
  for (unsigned s = 0; s < 2; s++) {
    const float a[4] = {A[g * kLdA + 8 * s + t], A[(g + 8) * kLdA + 8 * s + t], A[g * kLdA + 8 * s + t + 4],
                        A[(g + 8) * kLdA + 8 * s + t + 4]};
    float ah[4], al[4];
#pragma unroll
    for (unsigned i = 0; i < 4; i++) split_trunc(a[i], ah[i], al[i]);
#pragma unroll
    for (unsigned nt = 0; nt < 2; nt++) {
      float bh[2], bl[2];
      split_trunc(B[(8 * s + t) * kLdA + 8 * nt + g], bh[0], bl[0]);
      split_trunc(B[(8 * s + t + 4) * kLdA + 8 * nt + g], bh[1], bl[1]);
      mma3(acc[nt], ah, al, bh, bl);
    }
  }
}

/* block16_product's accumulators (negated where NEG) into a 16x16 block at B of stride kLdA: lane
 * (g, t) writes rows g and g + 8 at columns 8 nt + 2t, + 1. */
template <bool NEG>
__device__ __forceinline__ void block16_store(float *B, const float (&acc)[2][4], unsigned g, unsigned t) {
#pragma unroll
  for (unsigned nt = 0; nt < 2; nt++) {
    const unsigned c = 8 * nt + 2 * t;
    const float s[4] = {NEG ? -acc[nt][0] : acc[nt][0], NEG ? -acc[nt][1] : acc[nt][1], NEG ? -acc[nt][2] : acc[nt][2],
                        NEG ? -acc[nt][3] : acc[nt][3]};
    *reinterpret_cast<float2 *>(B + g * kLdA + c) = make_float2(s[0], s[1]);
    *reinterpret_cast<float2 *>(B + (g + 8) * kLdA + c) = make_float2(s[2], s[3]);
  }
}

/* One warp's share of the blocked inverse (prep_chunk): P = (P_ij if `load`) +
 * sum_{k0 <= k < k1} A_ik T_kj, kept at block (j, i) of Xs (above the diagonal), and if
 * `fin`, T_ij = -T_ii P_ij into block (i, j).  On the tensor cores (block16_product): as FMAs
 * from shared memory, a lane's 8 sums of 16 terms a product, these read ~2 words of shared memory
 * an FMA and were 55-60 % of phase 0's shared-memory wavefronts (docs/perf-prefill.md part 30).
 * Reads only blocks that earlier rounds completed.  Not inlined: its eight calls inlined were
 * eight copies of the unrolled products, and phase 0 stalled on instruction fetch in them; one
 * shared copy took phase 0 from 0.83 to 0.75 ms at 16384 tokens (docs/perf-prefill.md, v23). */
__device__ __noinline__ void tri_unit(const float *As, float *Xs, unsigned i, unsigned j,
                                         unsigned k0, unsigned k1, bool load, bool fin,
                                         unsigned lane) {
  const unsigned g = lane >> 2, t = lane & 3;
  float *P = Xs + 16 * j * kLdA + 16 * i;
  float acc[2][4];
#pragma unroll
  for (unsigned nt = 0; nt < 2; nt++) {
    const unsigned c = 8 * nt + 2 * t;
    const float2 x = load ? *reinterpret_cast<const float2 *>(P + g * kLdA + c) : make_float2(0.0f, 0.0f);
    const float2 y = load ? *reinterpret_cast<const float2 *>(P + (g + 8) * kLdA + c) : make_float2(0.0f, 0.0f);
    acc[nt][0] = x.x, acc[nt][1] = x.y, acc[nt][2] = y.x, acc[nt][3] = y.y;
  }
#pragma unroll 1
  for (unsigned k = k0; k < k1; k++) block16_product(acc, As + 16 * i * kLdA + 16 * k, Xs + 16 * k * kLdA + 16 * j, g, t);
  block16_store<false>(P, acc, g, t);
  if (!fin) return;
  __syncwarp();
#pragma unroll
  for (unsigned nt = 0; nt < 2; nt++)
#pragma unroll
    for (unsigned e = 0; e < 4; e++) acc[nt][e] = 0.0f;
  block16_product(acc, Xs + 16 * i * kLdA + 16 * i, P, g, t); /* T_ii (zero above its diagonal) times P */
  block16_store<true>(Xs + 16 * i * kLdA + 16 * j, acc, g, t); /* T_ij */
}

/* Every element of a tile array of mma accumulators set to zero. */
template <unsigned A, unsigned B, unsigned C>
__device__ __forceinline__ void zero(float (&x)[A][B][C]) {
#pragma unroll
  for (unsigned i = 0; i < A; i++)
#pragma unroll
    for (unsigned j = 0; j < B; j++)
#pragma unroll
      for (unsigned k = 0; k < C; k++) x[i][j][k] = 0.0f;
}

/* acc[i] = (rows of row tile i of X) K^T for the 8-column tiles up to the diagonal, the row
 * tiles P and 3 - P (P = 0 or 1: ten column tiles either way); X and K staged in shared
 * memory (stride kLdS), k steps of 8 up to dk.  Each tile sums its three products in the
 * order of mma3; the passes run across all tiles so that independent mma fill the latency. */
template <unsigned P>
__device__ __forceinline__ void kkt_rows(float (&acc)[2][8][4], const float *X, const float *Ks,
                                         unsigned dk, const lane_ids &l) {
  constexpr unsigned R0 = P, R1 = 3 - P, N0 = 2 * R0 + 2, N1 = 2 * R1 + 2; /* tiles, their widths */
  zero(acc);
#pragma unroll 1
  for (unsigned k = 0; k < dk / 8; k++) {
    const unsigned col = 8 * k + 2 * l.t;
    float ah[2][4], al[2][4], bh[N1][2], bl[N1][2];
#pragma unroll
    for (unsigned i = 0; i < 2; i++) {
      const unsigned ra = 16 * (i ? R1 : R0) + l.g;
      const float2 x = *reinterpret_cast<const float2 *>(X + ra * kLdS + col);
      const float2 y = *reinterpret_cast<const float2 *>(X + (ra + 8) * kLdS + col);
      const float a[4] = {x.x, y.x, x.y, y.y};
      split_a(a, ah[i], al[i]);
    }
#pragma unroll
    for (unsigned nt = 0; nt < N1; nt++) {
      const float2 b = *reinterpret_cast<const float2 *>(Ks + (8 * nt + l.g) * kLdS + col);
      split(b.x, bh[nt][0], bl[nt][0]);
      split(b.y, bh[nt][1], bl[nt][1]);
    }
#pragma unroll
    for (unsigned pass = 0; pass < 3; pass++)
#pragma unroll
      for (unsigned i = 0; i < 2; i++)
#pragma unroll
        for (unsigned nt = 0; nt < (i ? N1 : N0); nt++)
          mma(acc[i][nt], pass == 0 ? al[i] : ah[i], pass == 1 ? bl[nt] : bh[nt]);
  }
}

/* d += a b on one 16x8x16 tile of IEEE half operands (pairs packed low element first). */
__device__ __forceinline__ void mma_f16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* kkt_rows for the fp16 records (same tiles, same accumulators): one product of IEEE half
 * operands a tile, k steps of 16.  The operands are rounded once to 11 significant bits, the
 * class of the single tf32 product this replaces (M goes to the record in fp16, A reaches it
 * through W and U), at half its instructions: one cvt a pair instead of an emulated
 * round-to-nearest a value (cvt.rna.tf32 is emulated on sm_90: there a compare and a
 * predicated add, and a mask where the rounded value feeds arithmetic, as in the splits),
 * and one MMA for two.
 * Half's range is the record's own (its Qs and Kd^T planes are fp16 copies of the same rows).
 * dk is a multiple of 8: a k step's upper half past dk (never staged) is zero. */
template <unsigned P>
__device__ __forceinline__ void kkt_rows_f16(float (&acc)[2][8][4], const float *X, const float *Ks,
                                             unsigned dk, const lane_ids &l) {
  constexpr unsigned R0 = P, R1 = 3 - P, N0 = 2 * R0 + 2, N1 = 2 * R1 + 2; /* tiles, their widths */
  zero(acc);
  auto pair = [](const float *p, bool in) {
    const float2 v = in ? *reinterpret_cast<const float2 *>(p) : make_float2(0.0f, 0.0f);
    return f16x2_rn(v.x, v.y);
  };
#pragma unroll 1
  for (unsigned k = 0; k < dk; k += 16) {
    const unsigned c0 = k + 2 * l.t;
    const bool up = k + 8 < dk;
    uint32_t a[2][4], b[N1][2];
#pragma unroll
    for (unsigned i = 0; i < 2; i++) {
      const float *xa = X + (16 * (i ? R1 : R0) + l.g) * kLdS + c0, *xb = xa + 8 * kLdS;
      a[i][0] = pair(xa, true), a[i][1] = pair(xb, true), a[i][2] = pair(xa + 8, up), a[i][3] = pair(xb + 8, up);
    }
#pragma unroll
    for (unsigned nt = 0; nt < N1; nt++) {
      const float *kr = Ks + (8 * nt + l.g) * kLdS + c0;
      b[nt][0] = pair(kr, true), b[nt][1] = pair(kr + 8, up);
    }
#pragma unroll
    for (unsigned i = 0; i < 2; i++)
#pragma unroll
      for (unsigned nt = 0; nt < (i ? N1 : N0); nt++) mma_f16(acc[i][nt], a[i], b[nt]);
  }
}

/* The chunk's slabs of 64 tokens x 64 columns, in the order phase 0 takes them: K's columns
 * (nsk slabs), then V's (nsv). */
struct slabs {
  const float *K, *V;
  unsigned nsk, nsv, n;
  __device__ __forceinline__ unsigned kind(unsigned sl) const { return sl < nsk ? 0u : 1u; } /* K, V */
  __device__ __forceinline__ unsigned first_col(unsigned sl) const { return 64 * (sl < nsk ? sl : sl - nsk); }
};

/* This thread's 8 float4 of slab sl, zero past L tokens and past dk / dv.  VH: V's slabs are
 * IEEE half (sb.V the chunk's first row of vh [T, nv*dv] at the head): 4 loads of 8 halves,
 * each uint4 kept raw in a float4 (rows i / 8, columns 8 (i % 8)) and widened where it is
 * stored to shared memory. */
template <bool VH = false>
__device__ __forceinline__ void load_slab(float4 v[8], unsigned sl, const slabs &sb, unsigned L,
                                          const shape &p, unsigned tid) {
  const unsigned kind = sb.kind(sl), cs = sb.first_col(sl), lim = kind == 1 ? p.dv : p.dk;
  const float *src = kind == 0 ? sb.K : sb.V;
  if (VH && kind == 1) {
    const uint16_t *vh = reinterpret_cast<const uint16_t *>(src);
    const size_t ld = (size_t)p.nv * p.dv;
#pragma unroll
    for (unsigned u = 0; u < 4; u++) {
      const unsigned i = tid + kBlock * u, r = i / 8, c = cs + 8 * (i % 8); /* dv % 8 == 0 */
      const uint4 q = r < L && c < lim ? __ldg(reinterpret_cast<const uint4 *>(vh + r * ld + c)) : make_uint4(0, 0, 0, 0);
      v[u] = make_float4(__uint_as_float(q.x), __uint_as_float(q.y), __uint_as_float(q.z), __uint_as_float(q.w));
    }
    return;
  }
#pragma unroll
  for (unsigned u = 0; u < 8; u++) {
    const unsigned i = tid + kBlock * u, r = i / 16, c = cs + 4 * (i % 16);
    v[u] = r < L && c < lim ? __ldg(reinterpret_cast<const float4 *>(src + r * p.C + c))
                            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

/* Powers of two for the fp16 core's scales: phase 0's V slabs here, phase 1's S and D planes
 * (gdn_chunked_wg16.cuh, rescale_by). */
namespace f16 {
/* 2^k as a float, k in [-126, 127] */
__device__ __forceinline__ float exp2i(int k) { return __uint_as_float((unsigned)(127 + k) << 23); }
/* The exponent change d, |d| <= 126, that brings mx into [2^lo, 2^(lo+1)); 0 for 0, infinities
 * and NaN. */
__device__ __forceinline__ int shift_into(float mx, int lo) {
  if (!(mx > 0.0f) || !(mx <= 3.0e38f)) return 0;
  const int d = lo - ((int)((__float_as_uint(mx) >> 23) & 0xffu) - 127); /* mx in [2^ex, 2^(ex+1)) */
  return d > 126 ? 126 : d < -126 ? -126 : d; /* 2^d a float */
}
}  // namespace f16

/* T = (I + A)^-1 of the strictly lower A in As (stride kLdA) into Xs, in 16x16 blocks (T_ii,
 * T_ij for i > j; block rows and columns of 16 tokens), in f32 (the products below the diagonal
 * blocks by mma3, close to f32).  First the four diagonal blocks at once, T_ii = (I + A_ii)^-1
 * by forward substitution in f32 (16 dependent rows, not 64); then the blocks below them,
 * T_ij = -T_ii P_ij with P_ij = sum_{j <= k < i} A_ik T_kj, in three rounds by distance i - j
 * (see tri_unit; the terms of P_20, P_31 and P_30 whose T_kj is ready early are summed a round
 * ahead by warps that would idle).  In the last round, where warp 0 alone makes T_30, warps 1-3
 * run `side`.  The diagonal blocks are exact lower triangles (zero above their diagonal); above
 * the diagonal blocks Xs holds the P_ij, not T.  Ends with a barrier. */
template <typename Side>
__device__ __forceinline__ void invert_unit_lower(const float *As, float *Xs, const lane_ids &l, Side &&side) {
  const unsigned lane = l.tid & 31;
  if (l.tid < kCh) {
    const unsigned o = l.tid & ~15u, c = l.tid & 15u;
    float x[16];
#pragma unroll
    for (unsigned i = 0; i < 16; i++) {
      const float *Ai = As + (o + i) * kLdA + o;
      float s0 = i == c ? 1.0f : 0.0f, s1 = 0.0f;
#pragma unroll
      for (unsigned j4 = 0; j4 < i; j4 += 4) {
        const float4 a = *reinterpret_cast<const float4 *>(Ai + j4);
        s0 = fmaf(-a.x, x[j4], s0);
        if (j4 + 1 < i) s1 = fmaf(-a.y, x[j4 + 1], s1);
        if (j4 + 2 < i) s0 = fmaf(-a.z, x[j4 + 2], s0);
        if (j4 + 3 < i) s1 = fmaf(-a.w, x[j4 + 3], s1);
      }
      x[i] = s0 + s1;
    }
#pragma unroll
    for (unsigned i = 0; i < 16; i++) Xs[(o + i) * kLdA + o + c] = x[i];
  }
  __syncthreads();
  if (l.w == 0) tri_unit(As, Xs, 1, 0, 0, 1, false, true, lane);
  if (l.w == 1) tri_unit(As, Xs, 2, 1, 1, 2, false, true, lane);
  if (l.w == 2) tri_unit(As, Xs, 3, 2, 2, 3, false, true, lane);
  if (l.w == 3) {
    tri_unit(As, Xs, 2, 0, 0, 1, false, false, lane); /* A_20 T_00 */
    tri_unit(As, Xs, 3, 1, 1, 2, false, false, lane); /* A_31 T_11 */
  }
  __syncthreads();
  if (l.w == 0) tri_unit(As, Xs, 2, 0, 1, 2, true, true, lane);   /* + A_21 T_10 */
  if (l.w == 1) tri_unit(As, Xs, 3, 1, 2, 3, true, true, lane);   /* + A_32 T_21 */
  if (l.w == 2) tri_unit(As, Xs, 3, 0, 0, 2, false, false, lane); /* A_30 T_00 + A_31 T_10 */
  __syncthreads();
  if (l.w == 0)
    tri_unit(As, Xs, 3, 0, 2, 3, true, true, lane); /* + A_32 T_20 */
  else
    side(); /* warps 1-3, while warp 0 ends T_30: may read T's rows 0..47, which are final */
  __syncthreads();
}
__device__ __forceinline__ void invert_unit_lower(const float *As, float *Xs, const lane_ids &l) {
  invert_unit_lower(As, Xs, l, [] {});
}

/* The chunk of phase-0 block row j (workspace chunk j): its first token t0 and length L; false
 * where j is no sequence's chunk.  The last sequence whose chunks start at or before j, by
 * bisection on first_chunk. */
__device__ __forceinline__ bool chunk_at(const int *cu, const shape &p, size_t j, size_t &t0, unsigned &L) {
  unsigned lo = 0, hi = p.s - 1;
  while (lo < hi) {
    const unsigned mid = (lo + hi + 1) / 2;
    if (first_chunk(cu, mid) <= j)
      lo = mid;
    else
      hi = mid - 1;
  }
  const size_t first = first_chunk(cu, lo);
  const int ts = cu[lo], te = cu[lo + 1];
  if (first > j || te <= ts || (j - first) >= ((size_t)(te - ts) + kCh - 1) / kCh) return false;
  t0 = (size_t)ts + (j - first) * kCh;
  L = (size_t)te - t0 < kCh ? (unsigned)((size_t)te - t0) : kCh;
  return true;
}

/* This thread's token's g and beta of value head h (threads tid < 64; zero past the chunk's L tokens
 * from t0, and elsewhere), for chunk_gates.  Loaded first, before the chunk's K (and Q) copies are
 * issued: chunk_gates' scan is the setup's path, and these loads its latency (docs/perf-prefill.md
 * part 31). */
struct gate_in {
  float g, beta;
};
__device__ __forceinline__ gate_in gates_load(const float *g, const float *beta, size_t t0, unsigned L, unsigned h,
                                              const shape &p, const lane_ids &l) {
  const bool in = l.tid < kCh && l.tid < L;
  return {in ? g[(t0 + l.tid) * p.nv + h] : 0.0f, in ? beta[(t0 + l.tid) * p.nv + h] : 0.0f};
}

/* The chunk's g and beta (gates_load's x) into gs and bs, then
 * G, the inclusive prefix sum of g (G_{L-1} past L), for thread tid < 64 (0 elsewhere): a
 * shuffle scan in each of the first two warps, then warp 0's total (through sw[0], which no
 * thread reads again before the block's next barrier) added to warp 1's.  (A loop over the 64
 * tokens was a chain of 64 dependent shared-memory loads.)  Contains two barriers. */
__device__ __forceinline__ float chunk_gates(float *gs, float *bs, float *sw, const gate_in &x, const lane_ids &l) {
  if (l.tid < kCh) {
    gs[l.tid] = x.g;
    bs[l.tid] = x.beta;
  }
  __syncthreads();
  float G = 0.0f;
  if (l.tid < kCh) {
    G = gs[l.tid];
#pragma unroll
    for (unsigned o = 1; o < 32; o <<= 1) {
      const float v = __shfl_up_sync(0xffffffffu, G, o);
      if ((l.tid & 31u) >= o) G += v;
    }
    if (l.tid == 31) sw[0] = G;
  }
  __syncthreads();
  if (l.tid >= 32 && l.tid < kCh) G += sw[0];
  return G;
}

/* Phase 0 of one (chunk, value head): the record.  F16: the fp16 core's record; VH (with F16):
 * V from vh IEEE half [T, nv*dv] instead of qkv's value columns. */
template <bool F16 = false, bool VH = false>
__device__ __forceinline__ void prep_chunk(float *sm, const float *qkv, const float *g,
                                           const float *beta, const int *cu, float *wsf,
                                           const shape &p, const uint16_t *vh = nullptr) {
  static_assert(F16 || !VH, "V in half only for the fp16 record");
  const unsigned h = blockIdx.x % p.nv;
  const size_t j = blockIdx.x / p.nv;
  size_t t0;
  unsigned L;
  if (!chunk_at(cu, p, j, t0, L)) return;
  const unsigned kh = h / (p.nv / p.nk);
  const float *Q = qkv + t0 * p.C + (size_t)kh * p.dk;
  const float *K = qkv + t0 * p.C + (size_t)(p.nk + kh) * p.dk;
  const float *V = qkv + t0 * p.C + 2 * (size_t)p.nk * p.dk + (size_t)h * p.dv;
  uint32_t *rec = reinterpret_cast<uint32_t *>(wsf) + (j * p.nv + h) * kRec;
  float *gs = sm, *bs = sm + kCh, *sw = sm + 2 * kCh, *sd = sm + 3 * kCh, *eg = sm + 4 * kCh;
  float *As = sm + 5 * kCh, *Xs = As + kCh * kLdA;
  float *Th = Xs + kCh * kLdA, *Tl = Th + kCh * kCh; /* T's split A fragments (below) */
  float *Ks = sm + 5 * kCh, *Qt = Ks + kCh * kLdS; /* until A is written */
  const lane_ids l = lanes();
  const unsigned lane = l.tid & 31;
  const gate_in gx = gates_load(g, beta, t0, L, h, p, l);

  { /* the chunk's K and Q rows into shared memory (zero past L tokens) while G is summed
     * (an L2 prefetch of its V rows here was read again from memory: v14, perf-prefill.md) */
    const unsigned c = 4 * (l.tid & 31); /* this lane's 16 bytes of a row, rows w, w + 4, .. */
    if (c < p.dk) {
      const uint32_t ks = sm80::smem_u32(Ks + l.w * kLdS + c), qs = sm80::smem_u32(Qt + l.w * kLdS + c);
#pragma unroll 4
      for (unsigned r = l.w; r < kCh; r += 4) {
        const uint32_t off = (r - l.w) * kLdS * 4, n = r < L ? 16u : 0u;
        const size_t go = r < L ? r * p.C + c : 0;
        sm80::cp_async16(ks + off, K + go, n);
        sm80::cp_async16(qs + off, Q + go, n);
      }
    }
    sm80::cp_commit();
  }
  const float G = chunk_gates(gs, bs, sw, gx, l);
  const float G2 = G * kLog2e; /* the decays below are powers of 2 (one MUFU.EX2 each) */
  if (l.tid < kCh) gs[l.tid] = G2;
  __syncthreads();
  if (l.tid < kCh) {
    const bool in = l.tid < L;
    sw[l.tid] = in ? bs[l.tid] * exp2f(G2) : 0.0f;     /* rows of W's right factor */
    sd[l.tid] = in ? exp2f(gs[kCh - 1] - G2) : 0.0f;   /* columns of Kd^T */
    eg[l.tid] = in ? exp2f(G2) : 0.0f;                 /* rows of Qs */
    if (l.tid == 0) rec[kRecG] = __float_as_uint(exp2f(gs[kCh - 1]));
  }

  sm80::cp_wait<0>();
  __syncthreads();
  const unsigned nkb = (p.dk + 15) / 16; /* Qs' dk tiles */
  {
    /* Qs = Q e^G and Kd^T = (K e^(G_L - G))^T from the staged rows (zero past L tokens;
     * columns past dk, never staged, read as zero): warp w takes dk tiles w and w + 4.
     * Kd^T's tiles wholly past dk are written as zeros (wgmma multiplies them). */
    auto qv = [&](unsigned r, unsigned c) { return c < p.dk ? Qt[r * kLdS + c] : 0.0f; };
#pragma unroll 1
    for (unsigned kt = l.w; kt < 8; kt += 4) {
      if (kt < nkb) {
#pragma unroll
        for (unsigned R = 0; R < 4; R++) { /* Qs tile (m = token tile R, k = kt) */
          const unsigned ra = 16 * R + l.g, rb = ra + 8, c = 16 * kt + 2 * l.t;
          const float ea = eg[ra], eb = eg[rb];
          const float c0[4] = {qv(ra, c) * ea, qv(ra, c + 1) * ea, qv(rb, c) * eb, qv(rb, c + 1) * eb};
          const float c1[4] = {qv(ra, c + 8) * ea, qv(ra, c + 9) * ea, qv(rb, c + 8) * eb, qv(rb, c + 9) * eb};
          put_acc_tile<F16>(rec + kRecQ, REC_Q, R, kt, lane, c0, c1, 1.0f);
        }
      }
#pragma unroll
      for (unsigned kb = 0; kb < 4; kb++) { /* Kd^T tile (m = kt, k = token tile kb) */
        float v[8];
#pragma unroll
        for (unsigned e = 0; e < 8; e++) {
          /* e: (row g | g + 8) x (token 2t, 2t + 1 | 2t + 8, 2t + 9) in register order */
          const unsigned m = 16 * kt + l.g + ((e & 2) ? 8 : 0);
          const unsigned tk = 16 * kb + 2 * l.t + (e & 1) + ((e & 4) ? 8 : 0);
          v[e] = (m < p.dk ? Ks[tk * kLdS + m] : 0.0f) * sd[tk];
        }
        put_acc_tile<F16>(rec + kRecK, REC_K, kt, kb, lane, v, v + 4, 1.0f);
      }
    }
  }

  /* K K^T (warps 0, 1) and Q K^T (warps 2, 3), 8-column tiles up to the diagonal.  A warp
   * takes two 16-row tiles, 0 and 3 or 1 and 2, so each has ten column tiles (by rows, the
   * fourth warp had eight and the first two).  Fragments come from the staged K and Q; a B
   * fragment of K is split once for both row tiles. */
  const bool isq = l.w >= 2;
  const unsigned rt[2] = {l.w & 1u, 3u - (l.w & 1u)}; /* the row tiles */
  const unsigned ntl[2] = {2 * rt[0] + 2, 2 * rt[1] + 2};
  const float *Ar = isq ? Qt : Ks;
  float acc0[2][8][4];
  if (F16) { /* one product of half operands a tile (kkt_rows_f16) */
    if (l.w & 1)
      kkt_rows_f16<1>(acc0, Ar, Ks, p.dk, l);
    else
      kkt_rows_f16<0>(acc0, Ar, Ks, p.dk, l);
  } else {
    if (l.w & 1)
      kkt_rows<1>(acc0, Ar, Ks, p.dk, l);
    else
      kkt_rows<0>(acc0, Ar, Ks, p.dk, l);
  }
  __syncthreads(); /* A is written where K and Q were */
  /* A = strictly_lower(beta_r (k_r.k_c) e^(G_r - G_c)) into As (rows past L zero), or
   * M = lower((q_r.k_c) e^(G_r - G_c)) as the record's tiles, the zeros above the diagonal
   * included (wgmma multiplies them).  (The same loops with the row tiles known at compile
   * time, one copy a P as kkt_rows has, ran phase 0 8 % slower: docs/perf-prefill.md, v13.) */
#pragma unroll
  for (unsigned i = 0; i < 2; i++) {
    const unsigned ra = 16 * rt[i] + l.g, rb = ra + 8;
    const float gr[2] = {gs[ra], gs[rb]}, br[2] = {bs[ra], bs[rb]}; /* gs: G log2(e) */
#pragma unroll
    for (unsigned nt = 0; nt < 8; nt++) {
      if (nt < ntl[i]) {
        const unsigned c = 8 * nt + 2 * l.t; /* columns c, c + 1 */
        const float2 gc = *reinterpret_cast<const float2 *>(gs + c);
        float v[4];
#pragma unroll
        for (unsigned e = 0; e < 4; e++) {
          const unsigned r = e < 2 ? ra : rb, ce = c + (e & 1);
          const bool lower = r < L && ce <= r; /* ce <= r < L */
          /* F16: exp2 flushing results below 2^-126 to zero (one MUFU; exp2f adds a range
           * fix for subnormal results, which the fp16 records cannot hold anyway) */
          const float x = F16 ? gr[e >> 1] - ((e & 1) ? gc.y : gc.x) : gs[r] - gs[ce];
          const float decay = lower ? (F16 ? ex2_ftz(x) : exp2f(x)) : 0.0f;
          if (isq)
            acc0[i][nt][e] = lower ? acc0[i][nt][e] * decay : 0.0f;
          else if (F16)
            v[e] = lower && ce < r ? br[e >> 1] * acc0[i][nt][e] * decay : 0.0f;
          else /* (the f32-class kernels as they were) */
            As[r * kLdA + ce] = lower && ce < r ? bs[r] * acc0[i][nt][e] * decay : 0.0f;
        }
        if (F16 && !isq) {
          *reinterpret_cast<float2 *>(As + ra * kLdA + c) = make_float2(v[0], v[1]);
          *reinterpret_cast<float2 *>(As + rb * kLdA + c) = make_float2(v[2], v[3]);
        }
      }
    }
    if (isq) {
#pragma unroll
      for (unsigned kb = 0; kb < 4; kb++) {
        float c0[4], c1[4]; /* tiles past the row tile's diagonal were not computed */
#pragma unroll
        for (unsigned e = 0; e < 4; e++) {
          c0[e] = kb <= rt[i] ? acc0[i][2 * kb][e] : 0.0f;
          c1[e] = kb <= rt[i] ? acc0[i][2 * kb + 1][e] : 0.0f;
        }
        put_acc_tile<F16>(rec + kRecM, REC_M, rt[i], kb, lane, c0, c1, 1.0f);
      }
    }
  }
  __syncthreads();

  /* The first slab of W's and U's right factors (below) is loaded during the inverse. */
  slabs sb;
  sb.K = K, sb.V = VH ? reinterpret_cast<const float *>(vh + t0 * p.nv * p.dv + (size_t)h * p.dv) : V;
  sb.nsk = (p.dk + 63) / 64, sb.nsv = (p.dv + 63) / 64, sb.n = sb.nsk + sb.nsv;
  float4 slab[8];
  load_slab<VH>(slab, 0, sb, L, p, l.tid);

  /* T = (I + A)^-1 (T above the diagonal blocks is never read: W's and U's k steps stop at
   * the diagonal) */
  invert_unit_lower(As, Xs, l);
  if constexpr (F16) {
    /* T in fp16, once for all the slabs, as the A fragments of mma m16n8k16 for the (row
     * tile R, k step k) pairs on and below the diagonal (k <= R): fragment f = 4 R + k, lane ln
     * at 4 (32 f + ln) words, so that a lane reads its fragment as one 16-byte word. */
    uint32_t *Th16 = reinterpret_cast<uint32_t *>(Th);
    auto pair = [](const float *x) { return f16x2_rn(x[0], x[1]); };
    for (unsigned i = l.tid; i < 16 * 32; i += kBlock) {
      const unsigned f = i / 32, ln = i % 32, R = f / 4, k = f % 4; /* f is warp-uniform */
      if (k > R) continue;
      const float *xa = Xs + (16 * R + ln / 4) * kLdA + 16 * k + 2 * (ln % 4), *xb = xa + 8 * kLdA;
      *reinterpret_cast<uint4 *>(Th16 + 4 * i) = make_uint4(pair(xa), pair(xb), pair(xa + 8), pair(xb + 8));
    }
  } else {
    /* T's tf32 (hi, lo) parts, split once for all the slabs, as the mma A fragments of the
     * (row tile R, k step) pairs below the diagonal: fragment f = 8 R + k, lane ln at
     * 4 (32 f + ln), so that a lane reads its fragment as one 16-byte word. */
    for (unsigned i = l.tid; i < kCh * kCh / 4; i += kBlock) {
      const unsigned f = i / 32, ln = i % 32, R = f / 8, k = f % 8; /* f is warp-uniform */
      if (k >= 2 * R + 2) continue;
      const unsigned ra = (16 * R + ln / 4) * kLdA + 8 * k + 2 * (ln % 4), rb = ra + 8 * kLdA;
      const float x[4] = {Xs[ra], Xs[rb], Xs[ra + 1], Xs[rb + 1]};
      float h[4], lo[4];
      split_a<true>(x, h, lo);
      *reinterpret_cast<float4 *>(Th + 4 * i) = make_float4(h[0], h[1], h[2], h[3]);
      *reinterpret_cast<float4 *>(Tl + 4 * i) = make_float4(lo[0], lo[1], lo[2], lo[3]);
    }
  }
  __syncthreads();

  /* One slab at a time in shared memory (where A was), the next one's loads in flight:
   * - K and V: W = T (diag(beta e^G) K) and U = T (diag(beta) V).  Warp w takes the slab's
   *   columns 16w..16w+15 for all four row tiles of T (lower triangular: row tile R has
   *   2R + 2 k steps of 8, R + 1 of 16), so the warps do equal work; each B fragment is
   *   scaled (and split) once.
   * F16: one product of fp16 operands (m16n8k16), V's slab times a power of two that puts its
   * largest |value| in [2^14, 2^15) (exact; U is scaled back as it is stored).  W's and U's
   * split products (three for U) bought 10-20 % of the fp16 core's error (docs/numerics.md).
   * Otherwise three split tf32 products, every sum over k in the order the record has always
   * been computed in. */
  float *Uf = reinterpret_cast<float *>(rec + kRecU);
#pragma unroll 1
  for (unsigned sl = 0; sl < sb.n; sl++) {
    const unsigned kind = sb.kind(sl), cs = sb.first_col(sl);
    if (VH && kind == 1) { /* 8 halves a load widened into As, the warps' largest |V| into eg */
      float m = 0.0f;
#pragma unroll
      for (unsigned u = 0; u < 4; u++) {
        const unsigned i = l.tid + kBlock * u, r = i / 8, c = 8 * (i % 8);
        const float2 a = f16x2_to_f32(__float_as_uint(slab[u].x)), b = f16x2_to_f32(__float_as_uint(slab[u].y)),
                     d = f16x2_to_f32(__float_as_uint(slab[u].z)), e = f16x2_to_f32(__float_as_uint(slab[u].w));
        m = fmaxf(m, fmaxf(fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(b.x), fabsf(b.y))),
                           fmaxf(fmaxf(fabsf(d.x), fabsf(d.y)), fmaxf(fabsf(e.x), fabsf(e.y)))));
        *reinterpret_cast<float4 *>(As + r * kLdA + c) = make_float4(a.x, a.y, b.x, b.y);
        *reinterpret_cast<float4 *>(As + r * kLdA + c + 4) = make_float4(d.x, d.y, e.x, e.y);
      }
      m = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(m)));
      if (lane == 0) eg[l.w] = m;
    } else {
      if (F16 && kind == 1) { /* the warps' largest |V| of the slab into eg (free since Qs) */
        float m = 0.0f;
#pragma unroll
        for (unsigned u = 0; u < 8; u++)
          m = fmaxf(m, fmaxf(fmaxf(fabsf(slab[u].x), fabsf(slab[u].y)), fmaxf(fabsf(slab[u].z), fabsf(slab[u].w))));
        m = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(m)));
        if (lane == 0) eg[l.w] = m;
      }
#pragma unroll
      for (unsigned u = 0; u < 8; u++) {
        const unsigned i = l.tid + kBlock * u, r = i / 16, c = 4 * (i % 16);
        *reinterpret_cast<float4 *>(As + r * kLdA + c) = slab[u];
      }
    }
    __syncthreads();
    if (sl + 1 < sb.n) load_slab<VH>(slab, sl + 1, sb, L, p, l.tid);
    const unsigned kt = cs / 16 + l.w; /* the warp's 16-column tile of K or V */
    const float *scl = kind == 0 ? sw : bs;
    float acc[4][2][4];
    zero(acc);
    float vi = 1.0f; /* F16: U's scale back */
    if constexpr (F16) {
      float vs = 1.0f;
      if (kind == 1) { /* the slab's largest |V| into [2^14, 2^15) (0, inf and NaN keep 1) */
        const int d = f16::shift_into(fmaxf(fmaxf(eg[0], eg[1]), fmaxf(eg[2], eg[3])), 14);
        vs = f16::exp2i(d), vi = f16::exp2i(-d);
      }
      const uint32_t *Th16 = reinterpret_cast<const uint32_t *>(Th);
#pragma unroll
      for (unsigned k = 0; k < 4; k++) {
        const unsigned j0 = 16 * k + 2 * l.t; /* tokens j0, j0 + 1, j0 + 8, j0 + 9 */
        const float2 sa = *reinterpret_cast<const float2 *>(scl + j0), sb8 = *reinterpret_cast<const float2 *>(scl + j0 + 8);
        uint32_t b[2][2];
#pragma unroll
        for (unsigned j2 = 0; j2 < 2; j2++) {
          const float *x = As + j0 * kLdA + 16 * l.w + 8 * j2 + l.g;
          /* __fmul_rn: the product rounded before the scale (a power of two) and fp16 */
          b[j2][0] = f16x2_rn(__fmul_rn(x[0], sa.x) * vs, __fmul_rn(x[kLdA], sa.y) * vs);
          b[j2][1] = f16x2_rn(__fmul_rn(x[8 * kLdA], sb8.x) * vs, __fmul_rn(x[9 * kLdA], sb8.y) * vs);
        }
#pragma unroll
        for (unsigned R = 0; R < 4; R++) {
          if (k <= R) {
            const uint4 t = *reinterpret_cast<const uint4 *>(Th16 + 4 * (32 * (4 * R + k) + lane));
            const uint32_t a[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
            for (unsigned j2 = 0; j2 < 2; j2++) mma_f16(acc[R][j2], a, b[j2]);
          }
        }
      }
    } else {
#pragma unroll
      for (unsigned k = 0; k < 8; k++) {
        const unsigned col = 8 * k + 2 * l.t;
        const float s0 = scl[col], s1 = scl[col + 1];
        float bh[2][2], bl[2][2];
#pragma unroll
        for (unsigned j2 = 0; j2 < 2; j2++) {
          const unsigned n = 16 * l.w + 8 * j2 + l.g;
          /* __fmul_rn: the product is rounded before the split, as when it was stored */
          const float x0 = __fmul_rn(As[col * kLdA + n], s0), x1 = __fmul_rn(As[(col + 1) * kLdA + n], s1);
          split<true>(x0, bh[j2][0], bl[j2][0]);
          split<true>(x1, bh[j2][1], bl[j2][1]);
        }
#pragma unroll
        for (unsigned R = 0; R < 4; R++) {
          if (k < 2 * R + 2) {
            const unsigned fo = 4 * (32 * (8 * R + k) + lane);
            const float4 th = *reinterpret_cast<const float4 *>(Th + fo);
            const float4 tl = *reinterpret_cast<const float4 *>(Tl + fo);
            const float ah[4] = {th.x, th.y, th.z, th.w}, al[4] = {tl.x, tl.y, tl.z, tl.w};
#pragma unroll
            for (unsigned j2 = 0; j2 < 2; j2++) mma3(acc[R][j2], ah, al, bh[j2], bl[j2]);
          }
        }
      }
    }
#pragma unroll
    for (unsigned R = 0; R < 4; R++) {
      if (kind == 0) {
        put_acc_tile<F16>(rec + kRecW, REC_W, R, kt, lane, acc[R][0], acc[R][1], -1.0f);
      } else {
        const unsigned ra = 16 * R + l.g, rb = ra + 8;
#pragma unroll
        for (unsigned j2 = 0; j2 < 2; j2++) {
          const unsigned c = cs + 16 * l.w + 8 * j2 + 2 * l.t;
          *reinterpret_cast<float2 *>(Uf + ra * kDv + c) = make_float2(acc[R][j2][0] * vi, acc[R][j2][1] * vi);
          *reinterpret_cast<float2 *>(Uf + rb * kDv + c) = make_float2(acc[R][j2][2] * vi, acc[R][j2][3] * vi);
        }
      }
    }
    __syncthreads(); /* the next slab overwrites As */
  }
}

/* ---- phase 1: the chunks of one sequence in order ---------------------------------- */

/* A block's share of phase 1 (both phase-1 kernels): blocks take (sequence, value head,
 * BV value columns) in that order. */
struct scan_part {
  unsigned nvs, h, cb, c0; /* column blocks a head, value head, column block, first column */
  unsigned seq;            /* the sequence */
  int ts, te;              /* its tokens */
  float *Sg;               /* state[slot] at the block's first column; null for slot -1 */
};
/* False for a block with nothing to do: past the sequences, or an empty sequence (whose
 * state stays as it was). */
template <unsigned BV>
__device__ __forceinline__ bool scan_part_of(scan_part &b, float *state, const int *cu,
                                             const int *slots, const shape &p) {
  b.nvs = (p.dv + BV - 1) / BV;
  const unsigned seq = blockIdx.x / (p.nv * b.nvs), rem = blockIdx.x % (p.nv * b.nvs);
  b.seq = seq;
  b.h = rem / b.nvs;
  b.cb = rem % b.nvs;
  b.c0 = b.cb * BV;
  if (seq >= p.s) return false;
  b.ts = cu[seq];
  b.te = cu[seq + 1];
  if (b.ts < 0 || b.te <= b.ts) return false;
  const int slot = slots[seq];
  b.Sg = slot < 0 ? nullptr : state + ((size_t)slot * p.nv + b.h) * p.dk * p.dv + b.c0;
  return true;
}
/* The part's chunks, and the record of its first one (computed where needed: the mma.sync
 * kernel runs at its register limit). */
__device__ __forceinline__ size_t chunks_of(const scan_part &b) {
  return ((size_t)(b.te - b.ts) + kCh - 1) / kCh;
}
__device__ __forceinline__ const uint32_t *first_record(const scan_part &b, const int *cu,
                                                        const float *ws, const shape &p) {
  return reinterpret_cast<const uint32_t *>(ws) + (first_chunk(cu, b.seq) * p.nv + b.h) * kRec;
}

/* The 128-byte lines of record r into L2, this block's share (each of the head's column
 * blocks a share; nth threads a block). */
__device__ __forceinline__ void prefetch_record(const uint32_t *r, unsigned tid, unsigned nth,
                                                const scan_part &b) {
  for (unsigned i = tid + nth * b.cb; i < (unsigned)(kRec / 32); i += nth * b.nvs)
    prefetch_l2(r + 32 * i);
}

/* A lane's part of 16 rows x NT 8-column tiles in the mma accumulator layout: at(nt, e),
 * e = 2 hf + j, is row r + 8 hf (r: the lane's first row), column 8 nt + 2 t + j of the
 * block's columns.  ntv: which column tiles exist. */
template <unsigned NT, typename At>
__device__ __forceinline__ void load_state_rows(At at, const float *Sg, const shape &p, unsigned r,
                                                unsigned t, const bool (&ntv)[NT]) {
#pragma unroll
  for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
    for (unsigned hf = 0; hf < 2; hf++) {
      const unsigned m = r + 8 * hf;
      const float2 v = ld2_if(Sg && m < p.dk && ntv[nt], Sg + (size_t)m * p.dv + 8 * nt + 2 * t);
      at(nt, 2 * hf) = v.x;
      at(nt, 2 * hf + 1) = v.y;
    }
}
template <unsigned NT, typename At>
__device__ __forceinline__ void store_state_rows(At at, float *Sg, const shape &p, unsigned r,
                                                 unsigned t, const bool (&ntv)[NT]) {
#pragma unroll
  for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
    for (unsigned hf = 0; hf < 2; hf++) {
      const unsigned m = r + 8 * hf;
      if (m < p.dk && ntv[nt])
        *reinterpret_cast<float2 *>(Sg + (size_t)m * p.dv + 8 * nt + 2 * t) =
            make_float2(at(nt, 2 * hf), at(nt, 2 * hf + 1));
    }
}
/* U's token rows ra, rb (= ra + 8) of the block's columns, from record rec. */
template <unsigned NT, typename At>
__device__ __forceinline__ void load_u_rows(At at, const uint32_t *rec, unsigned c0, unsigned ra,
                                            unsigned t, const bool (&ntv)[NT]) {
  /* the row offset in 64 bits, so that loads share an address at constant offsets (summed
   * in 32 bits, every load's address was worked out on its own) */
  const float *U = reinterpret_cast<const float *>(rec + kRecU) + ((size_t)ra * kDv + c0 + 2 * t);
#pragma unroll
  for (unsigned nt = 0; nt < NT; nt++) {
    const float2 u0 = ld2_if(ntv[nt], U + 8 * nt), u1 = ld2_if(ntv[nt], U + 8 * kDv + 8 * nt);
    at(nt, 0) = u0.x, at(nt, 1) = u0.y, at(nt, 2) = u1.x, at(nt, 3) = u1.y;
  }
}
/* O's token rows ra, ra + 8 of the chunk at token t0 (those below L), value head h, the
 * block's columns from c0, as bf16 (round to nearest even, one cvt a pair; the address of
 * row ra once, row ra + 8 a token stride on: phase 1's step spent ~700 cycles here with
 * the conversion and the address done per pair in software). */
template <unsigned NT, typename At>
__device__ __forceinline__ void store_o_rows(At at, bf16 *o, const shape &p, unsigned h, unsigned c0,
                                             size_t t0, unsigned L, unsigned ra, unsigned t,
                                             const bool (&ntv)[NT]) {
  const size_t rs = (size_t)p.nv * p.dv; /* one token on in o */
  bf16 *const row = o + (t0 + ra) * rs + (size_t)h * p.dv + c0 + 2 * t;
#pragma unroll
  for (unsigned hf = 0; hf < 2; hf++) {
    if (ra + 8 * hf < L) {
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++)
        if (ntv[nt])
          *reinterpret_cast<uint32_t *>(row + 8 * hf * rs + 8 * nt) = bf16x2_rn(at(nt, 2 * hf), at(nt, 2 * hf + 1));
    }
  }
}

/* NT 8-column tiles of value columns per block.  A chunk step: S into shared memory as
 * (hi, lo) pairs; D = U + (-W) S and O = Qs S in one pass (each B fragment of S used by both);
 * D into shared memory; O += M D and S = e^(G_L) S + Kd^T D in one pass over D's k tiles.
 * The A fragments stream from the workspace a k tile ahead of their use (the next chunk's
 * first ones before this chunk's output is stored), and the next record is asked into L2
 * (each column block of the head a share of it) at the step's start.  The two passes' k
 * loops stay rolled: unrolled, the 32-column case spills at 255 registers. */
template <unsigned NT>
__device__ __forceinline__ void scan_chunks(float *smf, bf16 *o, float *state, const int *cu,
                                            const int *slots, const float *wsf, const shape &p) {
  using Y = layout1<NT>;
  uint32_t *Sp = reinterpret_cast<uint32_t *>(smf) + Y::S, *Dp = reinterpret_cast<uint32_t *>(smf) + Y::D;
  scan_part b;
  if (!scan_part_of<Y::BV>(b, state, cu, slots, p)) return;
  const unsigned h = b.h, c0 = b.c0;
  const lane_ids l = lanes();
  const unsigned lane = l.tid & 31;
  const unsigned nkb = (p.dk + 15) / 16;
  bool ntv[NT]; /* which of the block's 8-column tiles exist */
#pragma unroll
  for (unsigned nt = 0; nt < NT; nt++) ntv[nt] = c0 + 8 * nt < p.dv;
  const bool mtv[2] = {32 * l.w < p.dk, 32 * l.w + 16 < p.dk}; /* this warp's S row tiles */

  /* Warp w holds S rows 32w..32w+31 (two 16-row tiles) x the block's BV columns. */
  float sacc[2][NT][4];
#pragma unroll
  for (unsigned mt = 0; mt < 2; mt++)
    load_state_rows<NT>([&](unsigned nt, unsigned e) -> float & { return sacc[mt][nt][e]; }, b.Sg, p,
                        32 * l.w + 16 * mt + l.g, l.t, ntv);

  const unsigned ra = 16 * l.w + l.g, rb = ra + 8; /* this lane's token rows of D and O */
  const size_t nch = chunks_of(b), ts = (size_t)b.ts, te = (size_t)b.te;
  const uint32_t *rec = first_record(b, cu, wsf, p);
  frag wt = ld_tile(rec + kRecW, REC_W, l.w, 0, lane);
  frag qt = ld_tile(rec + kRecQ, REC_Q, l.w, 0, lane);

#pragma unroll 1
  for (size_t ci = 0; ci < nch; ci++) {
    const size_t t0 = ts + ci * kCh;
    const unsigned L = te - t0 < kCh ? (unsigned)(te - t0) : kCh;
    const bool more = ci + 1 < nch;
    const uint32_t *nrec = rec + (size_t)p.nv * kRec;
    if (more) prefetch_record(nrec, l.tid, kBlock, b); /* the next record into L2 */
    const float gL = __uint_as_float(__ldg(rec + kRecG));

    /* a. S into shared memory, U into the D accumulators */
#pragma unroll
    for (unsigned mt = 0; mt < 2; mt++)
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
        for (unsigned hf = 0; hf < 2; hf++)
          put_pair_t(Sp, Y::LS, 8 * nt + 2 * l.t, 32 * l.w + 16 * mt + l.g + 8 * hf,
                     sacc[mt][nt][2 * hf], sacc[mt][nt][2 * hf + 1]);
    float ad[NT][4], ao[NT][4];
    load_u_rows<NT>([&](unsigned nt, unsigned e) -> float & { return ad[nt][e]; }, rec, c0, ra, l.t, ntv);
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++) ao[nt][0] = ao[nt][1] = ao[nt][2] = ao[nt][3] = 0.0f;
    __syncthreads();

    /* b. D = U + (-W) S and O = Qs S, k over dk */
#pragma unroll 1
    for (unsigned kb = 0; kb < kDk / 16; kb++) {
      if (kb < nkb) {
        frag wn, qn;
        if (kb + 1 < nkb) {
          wn = ld_tile(rec + kRecW, REC_W, l.w, kb + 1, lane);
          qn = ld_tile(rec + kRecQ, REC_Q, l.w, kb + 1, lane);
        }
        uint32_t bh[NT][2], bl[NT][2];
#pragma unroll
        for (unsigned nt = 0; nt < NT; nt++)
          if (ntv[nt]) b_frag(Sp + (8 * nt + l.g) * Y::LS + 16 * kb, l.t, bh[nt], bl[nt]);
        /* the three products of each tile a pass apart: 2 NT independent mma in between */
#pragma unroll
        for (unsigned pass = 0; pass < 3; pass++)
#pragma unroll
          for (unsigned nt = 0; nt < NT; nt++)
            if (ntv[nt]) {
              mma_part(ad[nt], wt, bh[nt], bl[nt], pass);
              mma_part(ao[nt], qt, bh[nt], bl[nt], pass);
            }
        if (kb + 1 < nkb) wt = wn, qt = qn;
      }
    }

    /* The second pass's first fragments. */
    frag kt0 = ld_tile(rec + kRecK, REC_K, 2 * l.w, 0, lane);
    frag kt1 = ld_tile(rec + kRecK, REC_K, 2 * l.w + 1, 0, lane);
    frag mt0 = ld_tile(rec + kRecM, REC_M, l.w, 0, lane);

    /* c. D into shared memory */
#pragma unroll
    for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
      for (unsigned hf = 0; hf < 2; hf++)
        put_pair_t(Dp, Y::LD, 8 * nt + 2 * l.t, hf ? rb : ra, ad[nt][2 * hf], ad[nt][2 * hf + 1]);
    __syncthreads();

    /* d, e. O += M D (M's k tiles up to the diagonal), S = e^(G_L) S + Kd^T D; k over the
     * chunk's tokens */
#pragma unroll
    for (unsigned mt = 0; mt < 2; mt++)
#pragma unroll
      for (unsigned nt = 0; nt < NT; nt++)
#pragma unroll
        for (unsigned e = 0; e < 4; e++) sacc[mt][nt][e] *= gL;
#pragma unroll 1
    for (unsigned kb = 0; kb < kCh / 16; kb++) {
      if (16 * kb < L) {
        const bool nx = kb + 1 < kCh / 16 && 16 * (kb + 1) < L;
        frag kn0, kn1, mn;
        if (nx) {
          kn0 = ld_tile(rec + kRecK, REC_K, 2 * l.w, kb + 1, lane);
          kn1 = ld_tile(rec + kRecK, REC_K, 2 * l.w + 1, kb + 1, lane);
          if (kb + 1 <= l.w) mn = ld_tile(rec + kRecM, REC_M, l.w, kb + 1, lane);
        }
        uint32_t bh[NT][2], bl[NT][2];
#pragma unroll
        for (unsigned nt = 0; nt < NT; nt++)
          if (ntv[nt]) b_frag(Dp + (8 * nt + l.g) * Y::LD + 16 * kb, l.t, bh[nt], bl[nt]);
#pragma unroll
        for (unsigned pass = 0; pass < 3; pass++)
#pragma unroll
          for (unsigned nt = 0; nt < NT; nt++)
            if (ntv[nt]) {
              if (kb <= l.w) mma_part(ao[nt], mt0, bh[nt], bl[nt], pass);
              if (mtv[0]) mma_part(sacc[0][nt], kt0, bh[nt], bl[nt], pass);
              if (mtv[1]) mma_part(sacc[1][nt], kt1, bh[nt], bl[nt], pass);
            }
        if (nx) {
          kt0 = kn0, kt1 = kn1;
          if (kb + 1 <= l.w) mt0 = mn;
        }
      }
    }
    if (more) { /* the next chunk's first W and Qs fragments, in flight during what follows */
      wt = ld_tile(nrec + kRecW, REC_W, l.w, 0, lane);
      qt = ld_tile(nrec + kRecQ, REC_Q, l.w, 0, lane);
    }
    store_o_rows<NT>([&](unsigned nt, unsigned e) -> float & { return ao[nt][e]; }, o, p, h, c0, t0, L,
                     ra, l.t, ntv);
    rec = nrec;
    /* No barrier here: the next step writes Sp (last read before this step's second
     * barrier) and, after its first barrier, Dp. */
  }

  if (b.Sg) {
#pragma unroll
    for (unsigned mt = 0; mt < 2; mt++)
      store_state_rows<NT>([&](unsigned nt, unsigned e) -> float & { return sacc[mt][nt][e]; }, b.Sg, p,
                           32 * l.w + 16 * mt + l.g, l.t, ntv);
  }
}

/* The shape of a launch, false where the contract does not allow it: the wrappers launch
 * only allowed shapes, anything else does nothing. */
__device__ __forceinline__ bool shape_of(shape &p, const float *ws, unsigned s, unsigned nk,
                                         unsigned nv, unsigned dk, unsigned dv) {
  if (s == 0 || nk == 0 || nv < nk || nv % nk != 0 || dk == 0 || dk > kDk || dk % 8 != 0 ||
      dv == 0 || dv > kDv || dv % 8 != 0 || (reinterpret_cast<uintptr_t>(ws) & 15) != 0)
    return false;
  p.s = s;
  p.nk = nk;
  p.nv = nv;
  p.dk = dk;
  p.dv = dv;
  p.C = 2 * (size_t)nk * dk + (size_t)nv * dv;
  return true;
}

/* The mma.sync kernels' body. */
__device__ __forceinline__ void chunked_body(float *sm, bf16 *o, const float *qkv, const float *g,
                                             const float *beta, float *state, const int *cu_seqlens,
                                             const int *slots, float *ws, unsigned s, unsigned nk,
                                             unsigned nv, unsigned dk, unsigned dv, unsigned phase) {
  shape p;
  if (!shape_of(p, ws, s, nk, nv, dk, dv)) return;
  if (phase == 0) {
    prep_chunk(sm, qkv, g, beta, cu_seqlens, ws, p);
  } else if (phase == 1) { /* 16 or 32 value columns a block, told apart by the grid */
    if (gridDim.x == s * nv * ((dv + 15) / 16))
      scan_chunks<2>(sm, o, state, cu_seqlens, slots, ws, p);
    else if (gridDim.x == s * nv * ((dv + 31) / 32))
      scan_chunks<4>(sm, o, state, cu_seqlens, slots, ws, p);
  }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "gdn_chunked_wg.cuh"
#include "gdn_chunked_wg16.cuh"
#include "gdn_chunked_wh.cuh"
#endif
}  // namespace

/* The mma.sync kernels' shared memory: kSmem words (kernels.def's rows). */
extern __shared__ __align__(16) unsigned char smem_chunked[];
static_assert(mk_shared("delta_rule_prefill_chunked") == kSmem * 4 &&
                  mk_shared("delta_rule_prefill_chunked_prep") == kSmem * 4,
              "kernels.def METRALE_KERNEL_SHARED rows of the mma.sync kernels");

/* Two blocks per multiprocessor (255 registers): phase 1 with 16 columns runs 256 blocks at
 * one sequence of the a3b shape, and needs the registers. */
extern "C" __global__ void __launch_bounds__(kBlock, 2)
delta_rule_prefill_chunked(bf16 *o, const float *qkv, const float *g,
                                      const float *beta, float *state, const int *cu_seqlens,
                                      const int *slots, float *ws, unsigned s, unsigned nk,
                                      unsigned nv, unsigned dk, unsigned dv, unsigned phase) {
  chunked_body(reinterpret_cast<float *>(smem_chunked), o, qkv, g, beta, state, cu_seqlens, slots, ws, s, nk, nv, dk, dv, phase);
}
MK_CHECK(delta_rule_prefill_chunked, gdn_chunked);

/* The same kernel at three blocks per multiprocessor (168 registers): phase 0 (8192 blocks
 * at 16384 tokens, latency bound) gains warps; phase 1 would spill, so the ops take only
 * this kernel's phase 0 (the same prep_chunk code, the same workspace records). */
static_assert(mk_block("delta_rule_prefill_chunked_prep") == kBlock, "one block size for both");
extern "C" __global__ void __launch_bounds__(kBlock, 3)
delta_rule_prefill_chunked_prep(bf16 *o, const float *qkv, const float *g,
                                const float *beta, float *state, const int *cu_seqlens,
                                const int *slots, float *ws, unsigned s, unsigned nk,
                                unsigned nv, unsigned dk, unsigned dv, unsigned phase) {
  chunked_body(reinterpret_cast<float *>(smem_chunked), o, qkv, g, beta, state, cu_seqlens, slots, ws, s, nk, nv, dk, dv, phase);
}
MK_CHECK(delta_rule_prefill_chunked_prep, gdn_chunked);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Phase 1 on warpgroup MMAs (sm_90a only; elsewhere the entry is absent and the ops take
 * delta_rule_prefill_chunked's phase 1): one block an SM, 32 value columns a block. Its
 * phase 0 is prep_chunk, as in the other two entries. */
static_assert(mk_block("delta_rule_prefill_chunked_wg") == kBlock, "one warpgroup a block");
static_assert(layout_wg<4>::end <= mk_shared("delta_rule_prefill_chunked_wg") && kSmem * 4 <= layout_wg<4>::end,
              "kernels.def METRALE_KERNEL_SHARED row: phase 1's buffers (phase 0 fits in them)");
extern "C" __global__ void __launch_bounds__(kBlock, 1)
delta_rule_prefill_chunked_wg(bf16 *o, const float *qkv, const float *g, const float *beta,
                              float *state, const int *cu_seqlens, const int *slots, float *ws,
                              unsigned s, unsigned nk, unsigned nv, unsigned dk, unsigned dv,
                              unsigned phase) {
  extern __shared__ __align__(128) unsigned char smem_wg[];
  shape p;
  if (!shape_of(p, ws, s, nk, nv, dk, dv)) return;
  if (phase == 0)
    prep_chunk(reinterpret_cast<float *>(smem_wg), qkv, g, beta, cu_seqlens, ws, p);
  else if (phase == 1 && gridDim.x == s * nv * ((dv + 31) / 32))
    scan_chunks_wg<4>(smem_wg, o, state, cu_seqlens, slots, ws, p);
}
MK_CHECK(delta_rule_prefill_chunked_wg, gdn_chunked);

/* Both phases on IEEE half operands (sm_90a only): phase 0 is prep_chunk writing fp16
 * records, phase 1 the wgmma chunk step of gdn_chunked_wg16.cuh, 32 value columns a block;
 * three blocks an SM, as _prep, since phase 1's buffers fit in phase 0's shared memory. */
static_assert(mk_block("delta_rule_prefill_chunked_f16") == kBlock, "one warpgroup a block");
static_assert(mk_shared("delta_rule_prefill_chunked_f16") == kSmem * 4 && f16::layout::end <= kSmem * 4,
              "kernels.def METRALE_KERNEL_SHARED row: phase 0's shared memory, phase 1's buffers in it");
extern "C" __global__ void __launch_bounds__(kBlock, 3)
delta_rule_prefill_chunked_f16(bf16 *o, const float *qkv, const float *g, const float *beta,
                               float *state, const int *cu_seqlens, const int *slots, float *ws,
                               unsigned s, unsigned nk, unsigned nv, unsigned dk, unsigned dv,
                               unsigned phase) {
  extern __shared__ __align__(128) unsigned char smem_f16[];
  shape p;
  if (!shape_of(p, ws, s, nk, nv, dk, dv)) return;
  if (phase == 0)
    prep_chunk<true>(reinterpret_cast<float *>(smem_f16), qkv, g, beta, cu_seqlens, ws, p);
  else if (phase == 1 && gridDim.x == s * nv * ((dv + 31) / 32))
    scan_chunks_wg16(smem_f16, o, state, cu_seqlens, slots, ws, p);
}
MK_CHECK(delta_rule_prefill_chunked_f16, gdn_chunked);

/* delta_rule_prefill_chunked_f16's phase 0 alone.  Compiled with phase 1 in one entry, phase 0
 * ran 5-6 us slower at 4096 tokens and 16384 (H200: 133 -> 127-128 us, 475 -> 470 us, ncu;
 * docs/perf-prefill.md part 18): ptxas allocates and schedules the entry as a whole. */
static_assert(mk_block("delta_rule_prefill_chunked_f16_prep") == kBlock &&
                  mk_shared("delta_rule_prefill_chunked_f16_prep") == mk_shared("delta_rule_prefill_chunked_f16"),
              "kernels.def: the f16 kernel's block and shared memory");
extern "C" __global__ void __launch_bounds__(kBlock, 3)
delta_rule_prefill_chunked_f16_prep(bf16 *o, const float *qkv, const float *g, const float *beta,
                                    float *state, const int *cu_seqlens, const int *slots, float *ws,
                                    unsigned s, unsigned nk, unsigned nv, unsigned dk, unsigned dv,
                                    unsigned phase) {
  (void)o, (void)state, (void)slots;
  extern __shared__ __align__(128) unsigned char smem_f16p[];
  shape p;
  if (phase != 0 || !shape_of(p, ws, s, nk, nv, dk, dv)) return;
  prep_chunk<true>(reinterpret_cast<float *>(smem_f16p), qkv, g, beta, cu_seqlens, ws, p);
}
MK_CHECK(delta_rule_prefill_chunked_f16_prep, gdn_chunked);

/* delta_rule_prefill_chunked_f16_prep on v in IEEE half from vh (conv1d_prefill_l2norm_xhv): its
 * V slabs are half the bytes, widened exactly on their way to shared memory, so the record is
 * the one the f32 values of those halves give. */
static_assert(mk_block("delta_rule_prefill_chunked_f16_prep_vh") == kBlock &&
                  mk_shared("delta_rule_prefill_chunked_f16_prep_vh") == mk_shared("delta_rule_prefill_chunked_f16"),
              "kernels.def: the f16 kernel's block and shared memory");
extern "C" __global__ void __launch_bounds__(kBlock, 3)
delta_rule_prefill_chunked_f16_prep_vh(bf16 *o, const float *qkv, const float *g, const float *beta,
                                       float *state, const int *cu_seqlens, const int *slots, float *ws,
                                       unsigned s, unsigned nk, unsigned nv, unsigned dk, unsigned dv,
                                       unsigned phase, const uint16_t *vh) {
  (void)o, (void)state, (void)slots;
  extern __shared__ __align__(128) unsigned char smem_f16v[];
  shape p;
  if (phase != 0 || (uintptr_t)vh % 16u != 0 || !shape_of(p, ws, s, nk, nv, dk, dv)) return;
  prep_chunk<true, true>(reinterpret_cast<float *>(smem_f16v), qkv, g, beta, cu_seqlens, ws, p, vh);
}
MK_CHECK(delta_rule_prefill_chunked_f16_prep_vh, gdn_chunked);

/* The whole-head kernel (gdn_chunked_wh.cuh): phase 0 here, phase 1 by
 * delta_rule_prefill_chunked_wh, whose blocks are 512 threads. */
static_assert(mk_block("delta_rule_prefill_chunked_wh_prep") == kBlock &&
                  mk_shared("delta_rule_prefill_chunked_wh_prep") == (5 * kCh + kCh * kLdS) * 4 &&
                  5 * kCh + 2 * kCh * kLdA <= 5 * kCh + kCh * kLdS,
              "kernels.def: one warpgroup a block; K staged, then A and T where K was");
/* the two phase-0 entries: q and k from qkv (QKH false) or from ws's planes */
template <bool QKH>
__device__ __forceinline__ void wh_prep_entry(const float *qkv, const float *g, const float *beta, const int *cu_seqlens,
                                              float *ws, unsigned s, unsigned nk, unsigned nv, unsigned dk, unsigned dv,
                                              unsigned phase, const uint16_t *vh) {
  extern __shared__ __align__(128) unsigned char smem_whp[];
  shape p;
  if (phase != 0 || dk != kDk || dv != kDv || (uintptr_t)vh % 16u != 0 || !shape_of(p, ws, s, nk, nv, dk, dv))
    return; /* vh: phase 1 reads it */
  wh_prep<QKH>(reinterpret_cast<float *>(smem_whp), qkv, g, beta, cu_seqlens, reinterpret_cast<unsigned char *>(ws), p);
}
extern "C" __global__ void __launch_bounds__(kBlock, 3)
delta_rule_prefill_chunked_wh_prep(bf16 *o, const float *qkv, const float *g, const float *beta, float *state,
                                   const int *cu_seqlens, const int *slots, float *ws, unsigned s, unsigned nk,
                                   unsigned nv, unsigned dk, unsigned dv, unsigned phase, const uint16_t *vh) {
  (void)o, (void)state, (void)slots;
  wh_prep_entry<false>(qkv, g, beta, cu_seqlens, ws, s, nk, nv, dk, dv, phase, vh);
}
MK_CHECK(delta_rule_prefill_chunked_wh_prep, gdn_chunked);

static_assert(mk_block("delta_rule_prefill_chunked_wh_prep_qkh") == kBlock &&
                  mk_shared("delta_rule_prefill_chunked_wh_prep_qkh") == mk_shared("delta_rule_prefill_chunked_wh_prep") &&
                  wh::kPlaneQK <= kCh * kLdS * 4,
              "kernels.def: as delta_rule_prefill_chunked_wh_prep, k's plane staged where K was");
/* Six blocks an SM (80 registers, no spills; its 36 KiB of shared memory allow six): with q and k
 * no longer read in f32 its bytes do not bound it, and a fifth more solves in flight took it from
 * 121.9 to 116.9 us at 16384 tokens on the H100 (docs/perf-prefill.md part 28).  The f32 form
 * stays at three: six gave it nothing (part 26). */
extern "C" __global__ void __launch_bounds__(kBlock, 6)
delta_rule_prefill_chunked_wh_prep_qkh(bf16 *o, const float *qkv, const float *g, const float *beta, float *state,
                                       const int *cu_seqlens, const int *slots, float *ws, unsigned s, unsigned nk,
                                       unsigned nv, unsigned dk, unsigned dv, unsigned phase, const uint16_t *vh) {
  (void)o, (void)qkv, (void)state, (void)slots;
  wh_prep_entry<true>(nullptr, g, beta, cu_seqlens, ws, s, nk, nv, dk, dv, phase, vh);
}
MK_CHECK(delta_rule_prefill_chunked_wh_prep_qkh, gdn_chunked);

static_assert(mk_block("delta_rule_prefill_chunked_wh") == 512 && mk_shared("delta_rule_prefill_chunked_wh") == wh::END,
              "kernels.def: four warpgroups; the stages, planes and barriers");
extern "C" __global__ void __launch_bounds__(512, 1)
delta_rule_prefill_chunked_wh(bf16 *o, const float *qkv, const float *g, const float *beta, float *state,
                              const int *cu_seqlens, const int *slots, float *ws, unsigned s, unsigned nk,
                              unsigned nv, unsigned dk, unsigned dv, unsigned phase, const uint16_t *vh) {
  (void)qkv, (void)g, (void)beta;
  extern __shared__ __align__(128) unsigned char smem_wh[];
  shape p;
  if (phase != 1 || dk != kDk || dv != kDv || (uintptr_t)o % 16u != 0 || (uintptr_t)vh % 16u != 0 ||
      !shape_of(p, ws, s, nk, nv, dk, dv) || gridDim.x != s * nv)
    return;
  const unsigned seq = blockIdx.x / nv, h = blockIdx.x % nv, n = wh_chunks(cu_seqlens, seq, p);
  if (n == 0) return;
  float *Sg = slots[seq] < 0 ? nullptr : state + ((size_t)slots[seq] * nv + h) * wh::kMat;
  const wh_run run = {seq, h, 0, n, Sg, Sg, false, false};
  wh_scan<true>(smem_wh, o, cu_seqlens, reinterpret_cast<const unsigned char *>(ws), vh, p, run);
}
MK_CHECK(delta_rule_prefill_chunked_wh, gdn_chunked);

/* The same scan with each sequence in nseg segments (gdn_chunked_wh.cuh, wh_seg): three launches
 * after delta_rule_prefill_chunked_wh_prep's phase 0. */
static_assert(mk_block("delta_rule_prefill_chunked_wh_seg") == 512 &&
                  mk_shared("delta_rule_prefill_chunked_wh_seg") == wh::END,
              "kernels.def: the scan's block and shared memory (phase 2's buffers fit: wh_chain)");
extern "C" __global__ void __launch_bounds__(512, 1)
delta_rule_prefill_chunked_wh_seg(bf16 *o, const float *qkv, const float *g, const float *beta, float *state,
                                  const int *cu_seqlens, const int *slots, float *ws, unsigned s, unsigned nk,
                                  unsigned nv, unsigned dk, unsigned dv, unsigned phase, const uint16_t *vh,
                                  unsigned nseg, unsigned w0) {
  (void)qkv, (void)g, (void)beta;
  extern __shared__ __align__(128) unsigned char smem_whs[];
  shape p;
  if (phase < 1 || phase > 3 || nseg < METRALE_WH_NSEG_MIN || nseg > METRALE_WH_NSEG_MAX || w0 < METRALE_WH_W0_MIN ||
      w0 > METRALE_WH_W0_MAX || dk != kDk || dv != kDv || (uintptr_t)o % 16u != 0 ||
      (uintptr_t)vh % 16u != 0 || !shape_of(p, ws, s, nk, nv, dk, dv) ||
      gridDim.x != s * nv * (phase == 1 ? 2 * nseg - 3 : phase == 2 ? 4 : nseg - 1))
    return;
  wh_seg(smem_whs, o, state, cu_seqlens, slots, ws, vh, p, phase, nseg, w0);
}
MK_CHECK(delta_rule_prefill_chunked_wh_seg, gdn_chunked);
#endif

#else /* AMD (the HIP build): the portable form */

#define CFMA_FN __device__ __forceinline__
#define CFMA_SYNC() __syncthreads()
#define CFMA_TID threadIdx.x
#define CFMA_BID blockIdx.x
#define CFMA_NBLOCKS gridDim.x
#define CFMA_UNROLL _Pragma("unroll")
#define CFMA_BF16(f) f32_to_bf16(f)
#include "gdn_chunked_fma.cuh"

static_assert(mk_block("delta_rule_prefill_chunked") == CFMA_BLOCK, "kernels.def: the block size");
static_assert(CFMA_REC_FLOATS * 4 == 147584 && CFMA_REC_G + CFMA_CH <= CFMA_REC_FLOATS,
              "kernels.def states the record size; W, U, M and G fit in it");
/* Its shared memory is the static pool below (25 KB): the HIP backend launches it without
 * the manifest's dynamic amount, which is the mma.sync kernels' (backends/hip/hip_kernels.c). */
extern "C" __global__ void __launch_bounds__(CFMA_BLOCK)
delta_rule_prefill_chunked(bf16 *o, const float *qkv, const float *g, const float *beta, float *state,
                           const int *cu_seqlens, const int *slots, float *ws, unsigned s, unsigned nk,
                           unsigned nv, unsigned dk, unsigned dv, unsigned phase) {
  __shared__ float pool[CFMA_POOL_FLOATS];
  const cfma_args a = {o, qkv, g, beta, state, cu_seqlens, slots, ws, s, nk, nv, dk, dv};
  cfma_run(pool, &a, phase);
}
MK_CHECK(delta_rule_prefill_chunked, gdn_chunked);

#endif
