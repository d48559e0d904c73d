/* delta_rule_prefill_chunked_wh on sm_90a: the chunked delta rule with a whole value head a
 * block.  Included by gdn_chunked.cu inside its anonymous namespace and an sm_90a guard.
 *
 * The same chunks and algebra as the file's head comment, rearranged so that nothing but the
 * solve is made ahead of the scan (docs/perf-prefill.md, "Next (2026-12-06)"): with
 * Tb = T diag(beta) (T = (I + A)^-1 as there, decays included),
 *   R = V - diag(e^G) (K S)                 the chunk's values less what S predicts
 *   D = Tb R                                (= U - W S)
 *   O = diag(e^G) (Q S) + M D               M = lower_with_diagonal((Q K^T) e^(G_i - G_j))
 *   S = e^(G_L) S + K^T (diag(e^(G_L - G)) D)
 * so a chunk reads q, k, v, Tb and G (56 KiB) where the fp16 kernel's phase 1 reads a record
 * of ~88 KiB made by a phase 0 that wrote it (docs/perf-prefill.md, part 23).
 *
 * Phase 0 (wh_prep, 128 threads, a block a (chunk, value head)): G, K K^T, A and T as
 * prep_chunk makes them, then Tb in IEEE half and the chunk's G; q and k in half (once a key
 * head, by the block of its first value head).  v is read by phase 1 from vh, by two TMA copies
 * a chunk.  Phase 1 (wh_scan, 512 threads, a block a (sequence, value head)): four warpgroups,
 * every product a wgmma from shared memory with IEEE half operands and f32 accumulators:
 *   warpgroups 0 and 3 (the state, dk rows 0..63 and 64..127, S in f32 accumulators):
 *     S = e^(G_L) S + K^T Dn, then S into its fp16 plane (two planes, by the chunk's parity);
 *   warpgroup 1 (the values): P = K S, R = V - e^G P into a plane, D = Tb R, D and
 *     Dn = e^(G_L - G) D into planes;
 *   warpgroup 2 (the outputs): M from Q K^T into a plane, O = e^G (Q S) + M D, O staged in
 *     shared memory by rows and stored in 16-byte words; its first thread also brings each
 *     chunk's inputs into one of two stages (q, k, Tb and G by two bulk copies, v by two TMA
 *     copies) once S of the chunk before is out (every warpgroup is then done with the chunk
 *     two before; a loader warp of its own would cap the block's registers at 96: 544
 *     threads; the chain's warpgroups spilled).
 * The chain a chunk is S plane -> K S -> R plane -> Tb R -> Dn plane -> K^T Dn -> S plane; the
 * outputs' work runs beside it (S in two planes, each consumer its own barriers).
 *
 * Range: a plane's values must stay below half's 65504.  Every product is linear, so the
 * block keeps S, R, D and O times 2^e: the state warpgroups choose e after each update so
 * that the largest |S| stays in [2^3, 2^9) (moved into [2^5, 2^6) where it left); the values
 * warpgroup moves it for the chunk where R reaches 2^15 or stays below 2^-3 (v far above or below the
 * state, or a zero state), or D reaches 2^15, telling the others by how much before they use
 * D.  Exponents stay in [-120, 120]. */

namespace wh {
constexpr unsigned kPlaneQK = kCh * kDk * 2; /* Q or K of a (chunk, key head) in half: 16 KiB */
constexpr unsigned kRecA = 2 * kPlaneQK;     /* record A of a (chunk, key head): Q then K */
constexpr unsigned kTb = kCh * kCh * 2;
/* record B of a (chunk, value head): Tb, then G log2(e) (64 floats) */
constexpr unsigned kBTb = 0, kBG = kTb, kRecB = kBG + kCh * 4;
static_assert(kRecA % 128 == 0 && kRecB % 16 == 0, "records of whole 16-byte units");
static_assert(kPlaneQK == METRALE_WH_PLANE_BYTES && kRecA == METRALE_WH_QK_BYTES && METRALE_WH_PLANE_AT(9u, 17u) ==
                  (1u * 16u + 2u) * 128u + 1u * 16u + 1u * 2u,
              "kernels.def's q/k planes (kernel_bounds.h) are record A, the layout below");
static_assert(kRecA + kRecB <= 147584, "a (chunk, value head) takes no more workspace than the f16 kernel's");

/* Layouts (bytes), every plane made of 8x8 core matrices of 8 rows of 16 bytes:
 *   Q, K [64 tokens, 128]: (tok, d) at ((tok/8) 16 + d/8) 128 + (tok%8) 16 + (d%8) 2, so that
 *     a plane is K-major for K S, Q S (A, m = tokens) and Q K^T (B, n = tokens) and MN-major
 *     for K^T Dn (A, m = d): core matrices 128 bytes apart along d, 2048 along tokens;
 *   Tb and M [64, 64]: (r, c) at ((r/8) 8 + c/8) 128 + (r%8) 16 + (c%8) 2 (K-major A);
 *   V [64 tokens, 128] of a stage: two planes of 64 columns, each [64 tokens, 128 bytes] as a TMA
 *     copy with the 128-byte swizzle writes it (16-byte word u of row r at u ^ (r % 8), so that
 *     the values' reads of a warp's 8 rows fall in distinct banks), by two copies of a tensor map
 *     over vh from the template H16_K64_R64 (tma_templates.h): one instruction a plane where a
 *     copy a row took ~a quarter of the outputs' warpgroup's step (docs/perf-prefill.md, part 29);
 *   O's stage [64 tokens, 128] bf16: rows of 256 bytes, 16-byte word c of row r at c ^ (r % 8)
 *     (stmatrix's 8 rows in distinct banks, without padding);
 *   S, R, D, Dn [k, 128 columns]: B planes as gdn_chunked_wg16.cuh's put_plane writes them. */
constexpr unsigned KC = 16 * 128; /* an 8-row k chunk of a 128-column B plane */
constexpr unsigned kSPlane = 16 * KC;
constexpr unsigned kVHalf = kCh * 128; /* a V plane: 64 tokens x 64 columns in half */
/* shared memory of phase 1: V of stage b at b kVBytes from the first 1024-byte boundary (the
 * swizzle's span times 8; v_planes), then stage b's records (Q, K, Tb, G) at RS + b kStage */
constexpr unsigned kVBytes = 2 * kVHalf, RS = 2 * kVBytes + 1024, kStage = kRecA + kRecB;
constexpr unsigned SQ = 0, SK = kPlaneQK, STb = kRecA + kBTb, SG = kRecA + kBG;
constexpr unsigned S0 = RS + 2 * kStage, VD = S0 + 2 * kSPlane, VN = VD + 8 * KC, PO = VN + 8 * KC;
constexpr unsigned EX = PO + kCh * kDv * 2; /* sigma[2], kshift[2], the state's maxima [2][8], the values' [2][4] */
constexpr unsigned MAP = EX + 128;          /* v's tensor map while the outputs' warp 0 makes it */
constexpr unsigned BAR = MAP + METRALE_TMA_BYTES, END = BAR + 32;
static_assert(8 * KC <= kCh * kDv * 2, "M's plane fits in O's stage");
static_assert(kVBytes % 1024 == 0 && kStage % 128 == 0 && S0 % 128 == 0 && EX % 16 == 0 && MAP % 128 == 0,
              "planes aligned");
static_assert(END <= 232448, "the kernels' shared memory fits an sm_90 block's 227 KiB");
/* The shared address of the V planes: the first 1024-byte boundary from s0, the block's shared
 * memory (its 1024 bytes of slack before RS: only V is placed at run time, so that every other
 * address stays a constant the compiler folds; a run-time base spilled the chain's registers). */
__device__ __forceinline__ uint32_t v_planes(uint32_t s0) { return (s0 + 1023u) & ~1023u; }

/* Named barriers (sm90::bar_*), by the chunk's parity where one side can run a chunk ahead */
enum : unsigned {
  B_S_VAL = 1,   /* S ready for the values: the state arrives (384) */
  B_D_STATE = 2, /* D ready for the state: the values arrive (384) */
  B_S_FREE0 = 3, /* S plane 0 / 1 read by Q S: the outputs arrive (384) */
  B_D_FREE = 4,  /* D's plane read by M D: the outputs arrive (256).  (Dn's, the state's operand, is
                    free once the state has put S: B_S_VAL.  With the state arriving here too, its
                    arrival for chunk c could complete the phase of chunk c - 1 before the outputs'.) */
  B_VAL = 5,     /* the values warpgroup's own (128) */
  B_OUT = 6,     /* the outputs warpgroup's own (128) */
  B_S_FREE1 = 7,
  B_S_OUT0 = 8, /* S ready for the outputs, planes 0 / 1 (384) */
  B_D_OUT0 = 10, /* D ready for the outputs, by parity (256) */
  B_STATE = 12,  /* the two state warpgroups' (256) */
  B_KS0 = 13     /* K S of chunk c done, by parity: the values arrive, the outputs wait (256) before
                    their Q S, which took the tensor cores from the chain's K S */
};

/* 16 accumulator rows (k chunks kc, kc + 1) of acc into a K-major B plane, the lane's first row
 * times sa, its second (8 on) times sb (SC false: as they are, sa and sb unused) */
template <bool SC = true>
__device__ __forceinline__ void put_b(uint32_t plane, unsigned kc, const float (&acc)[64], float sa, float sb,
                                      unsigned lane) {
  const unsigned i = lane >> 3, j = lane & 7u;
#pragma unroll
  for (unsigned nt = 0; nt < 16; nt += 2) {
    uint32_t h[4];
#pragma unroll
    for (unsigned m = 0; m < 4; m++) {
      const float sc = m & 1 ? sb : sa; /* registers 4 nt + 2 m: m odd the rows 8 on */
      h[m] = SC ? f16x2_rn(sc * acc[4 * nt + 2 * m], sc * acc[4 * nt + 2 * m + 1])
                : f16x2_rn(acc[4 * nt + 2 * m], acc[4 * nt + 2 * m + 1]);
    }
    sm90::stmatrix_x4_trans(plane + (kc + (i & 1u)) * KC + (nt + (i >> 1)) * 128u + j * 16u, h[0], h[1], h[2], h[3]);
  }
}
/* The 64x64 accumulators of warp w (rows 16w..) into a K-major A plane of 64 columns */
__device__ __forceinline__ void put_a64(uint32_t plane, unsigned w, const float (&acc)[32], unsigned lane) {
  const unsigned i = lane >> 3, j = lane & 7u;
#pragma unroll
  for (unsigned nt = 0; nt < 8; nt += 2) {
    uint32_t h[4];
#pragma unroll
    for (unsigned m = 0; m < 4; m++) h[m] = f16x2_rn(acc[4 * nt + 2 * m], acc[4 * nt + 2 * m + 1]);
    sm90::stmatrix_x4(plane + (2 * w + (i & 1u)) * 1024u + (nt + (i >> 1)) * 128u + j * 16u, h[0], h[1], h[2], h[3]);
  }
}
/* O's rows 16w.. of acc times sc, as bf16, into the stage (word c of row r at c ^ (r % 8)) */
__device__ __forceinline__ void put_o(uint32_t stage, unsigned w, const float (&acc)[64], float sc, unsigned lane) {
  const unsigned i = lane >> 3, j = lane & 7u;
#pragma unroll
  for (unsigned nt = 0; nt < 16; nt += 2) {
    uint32_t h[4];
#pragma unroll
    for (unsigned m = 0; m < 4; m++) h[m] = bf16x2_rn(sc * acc[4 * nt + 2 * m], sc * acc[4 * nt + 2 * m + 1]);
    sm90::stmatrix_x4(stage + (16 * w + 8 * (i & 1u) + j) * 256u + (((nt + (i >> 1)) ^ j) * 16u), h[0], h[1], h[2],
                      h[3]); /* row % 8 == j */
  }
}
/* The largest |x|: eight running maxima (a tree over a temporary array of 32 went to local
 * memory: ~2 us a chunk step, the chain's largest cost; docs/perf-prefill.md part 23) */
__device__ __forceinline__ float amax64(const float (&x)[64]) {
  float m[8];
#pragma unroll
  for (unsigned i = 0; i < 8; i++) m[i] = fabsf(x[i]);
#pragma unroll
  for (unsigned i = 8; i < 64; i++) m[i % 8] = fmaxf(m[i % 8], fabsf(x[i]));
  return fmaxf(fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3])), fmaxf(fmaxf(m[4], m[5]), fmaxf(m[6], m[7])));
}
/* The largest m of N warps' threads: each warp's into red[slot], barrier id, the N's largest */
template <unsigned N>
__device__ __forceinline__ float group_max(float m, float *red, unsigned slot, unsigned id, unsigned lane) {
  m = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(m)));
  if (lane == 0) red[slot] = m;
  sm90::bar_sync(id, 32 * N);
  float r = red[0];
#pragma unroll
  for (unsigned i = 1; i < N; i++) r = fmaxf(r, red[i]);
  return r;
}
__device__ __forceinline__ void scale64(float (&x)[64], float f) {
#pragma unroll
  for (unsigned i = 0; i < 64; i++) x[i] *= f;
}
/* descriptor steps (16-byte units): a k16 step of a K-major plane along its 16-byte rows, of
 * an MN-major Q/K plane (16 tokens), of a B plane (two k chunks) */
constexpr uint64_t kStepK = 256 >> 4, kStepTok = (2 * 2048) >> 4, kStepB = (2 * KC) >> 4;
/* a chunk of kCh tokens (true) or the last of a sequence (false), as a type: the values' R */
template <bool B> struct whole_chunk {
  static constexpr bool value = B;
};
}  // namespace wh

/* Each (chunk, value head)'s bound b on how much of the state the chunk keeps, after the records
 * (nc chunks): a chunk maps S to prod_t e^(g_t) (I - beta_t k_t k_t^T) S + ..., whose norm is at most
 * e^(G_L) where every token's beta |k|^2 lies in [0, 2], so b = G_L log2(e) there and +inf
 * elsewhere (no bound).  Phase 0 writes them; the segments' passes read them (wh_forget_from). */
__device__ __forceinline__ float *wh_bounds(const void *ws, size_t nc, const shape &p) {
  using namespace wh;
  return reinterpret_cast<float *>(const_cast<unsigned char *>(static_cast<const unsigned char *>(ws)) +
                                   nc * p.nk * kRecA + nc * p.nv * kRecB);
}

/* K K^T's 16x8 tiles (row tile R0, column tiles [B0, E0)) and (R1, [B1, E1)) into acc[0][nt] and
 * acc[1][nt], as kkt_rows_f16 makes them from f32 K, here from K's IEEE half plane Kp in shared
 * memory (kernel_bounds.h's layout): the same halves and k order, so the same products.  The plane's
 * core matrices are ldmatrix's 8x8 matrices: a row tile's A fragment one x4, two column tiles' B
 * fragments one x4 (one x2 for a column tile alone), each matrix 128 contiguous bytes. */
__device__ __forceinline__ bool in_span(unsigned x, unsigned b, unsigned e) { return x >= b && x < e; }
template <unsigned R0, unsigned B0, unsigned E0, unsigned R1, unsigned B1, unsigned E1>
__device__ __forceinline__ void kkt_tiles_plane(float (&acc)[2][8][4], const unsigned char *Kp, const lane_ids &l) {
  static_assert(E0 <= 2 * R0 + 2 && E1 <= 2 * R1 + 2 && B0 <= E0 && B1 <= E1, "tiles on or below the diagonal");
  zero(acc);
  const uint32_t kp = sm80::smem_u32(Kp);
  const unsigned r8 = l.tid & 7u, q = (l.tid >> 3) & 3u; /* row r8 of matrix q, the lane's address */
  auto need = [](unsigned nt) { return in_span(nt, B0, E0) || in_span(nt, B1, E1); };
#pragma unroll 1
  for (unsigned k = 0; k < kDk; k += 16) {
    uint32_t a[2][4], b[8][2];
#pragma unroll
    for (unsigned i = 0; i < 2; i++) {
      if (i == 1 && B1 == E1) break;
      /* matrices: rows 0-7 / 8-15 of the row tile (q % 2), k 0-7 / 8-15 (q / 2): a0..a3 */
      sm80::ldsm_x4(a[i], kp + METRALE_WH_PLANE_AT(16 * (i ? R1 : R0) + 8 * (q & 1) + r8, k + 8 * (q >> 1)));
    }
    bool paired = false;
#pragma unroll
    for (unsigned nt = 0; nt < 8; nt++) {
      if (paired) {
        paired = false;
        continue;
      }
      if (!need(nt)) continue;
      if (nt + 1 < 8 && need(nt + 1)) { /* matrices (nt, k), (nt, k + 8), (nt + 1, k), (nt + 1, k + 8) */
        uint32_t r[4];
        sm80::ldsm_x4(r, kp + METRALE_WH_PLANE_AT(8 * (nt + (q >> 1)) + r8, k + 8 * (q & 1)));
        b[nt][0] = r[0], b[nt][1] = r[1], b[nt + 1][0] = r[2], b[nt + 1][1] = r[3];
        paired = true;
      } else {
        sm80::ldsm_x2(b[nt], kp + METRALE_WH_PLANE_AT(8 * nt + r8, k + 8 * (q & 1)));
      }
    }
#pragma unroll
    for (unsigned nt = B0; nt < E0; nt++) mma_f16(acc[0][nt], a[0], b[nt]);
#pragma unroll
    for (unsigned nt = B1; nt < E1; nt++) mma_f16(acc[1][nt], a[1], b[nt]);
  }
}

/* A = strictly_lower(diag(beta) (K K^T) e^(G_r - G_c)) at the tiles of kkt_tiles_plane's (R0, [B0, E0))
 * and (R1, [B1, E1)) into As (zero on and above the diagonal and past L); whether a token's
 * beta k.k lies outside [0, 2] */
template <unsigned R0, unsigned B0, unsigned E0, unsigned R1, unsigned B1, unsigned E1>
__device__ __forceinline__ bool a_tiles(const float (&acc)[2][8][4], float *As, const float *gs, const float *bs,
                                        unsigned L, const lane_ids &l) {
  bool grow = false;
#pragma unroll
  for (unsigned i = 0; i < 2; i++) {
    const unsigned ra = 16 * (i ? R1 : R0) + l.g, rb = ra + 8;
    const float gr[2] = {gs[ra], gs[rb]}, br[2] = {bs[ra], bs[rb]};
#pragma unroll
    for (unsigned nt = i ? B1 : B0; nt < (i ? E1 : E0); nt++) {
      const unsigned c = 8 * nt + 2 * l.t;
      const float2 gc = *reinterpret_cast<const float2 *>(gs + c);
      float v[4];
#pragma unroll
      for (unsigned e = 0; e < 4; e++) {
        const unsigned rr = e < 2 ? ra : rb, ce = c + (e & 1);
        const bool lower = rr < L && ce < rr;
        v[e] = lower ? br[e >> 1] * acc[i][nt][e] * ex2_ftz(gr[e >> 1] - ((e & 1) ? gc.y : gc.x)) : 0.0f;
        if (rr < L && ce == rr) { /* k_r.k_r on the diagonal */
          const float bn = br[e >> 1] * acc[i][nt][e];
          grow |= !(bn >= 0.0f && bn <= 2.0f);
        }
      }
      *reinterpret_cast<float2 *>(As + ra * kLdA + c) = make_float2(v[0], v[1]);
      *reinterpret_cast<float2 *>(As + rb * kLdA + c) = make_float2(v[2], v[3]);
    }
  }
  return grow;
}

/* Phase 0 of one (chunk, value head).  QKH: q and k are already in ws's planes (conv1d_prefill_l2norm_qkh
 * wrote them); K K^T from k's plane, nothing of record A written. */
template <bool QKH>
__device__ __forceinline__ void wh_prep(float *sm, const float *qkv, const float *g, const float *beta, const int *cu,
                                        unsigned char *ws, const shape &p) {
  using namespace wh;
  const unsigned h = blockIdx.x % p.nv;
  const size_t j = blockIdx.x / p.nv;
  size_t t0;
  unsigned L;
  if (!chunk_at(cu, p, j, t0, L)) return;
  const unsigned r = p.nv / p.nk, kh = h / r;
  const float *Q = qkv + t0 * p.C + (size_t)kh * p.dk;
  const float *K = qkv + t0 * p.C + (size_t)(p.nk + kh) * p.dk;
  const size_t nc = first_chunk(cu, p.s);
  unsigned char *recA = ws + (j * p.nk + kh) * kRecA;
  unsigned char *recB = ws + nc * p.nk * kRecA + (j * p.nv + h) * kRecB;
  float *gs = sm, *bs = sm + kCh, *sw = sm + 2 * kCh;
  float *As = sm + 5 * kCh, *Xs = As + kCh * kLdA;
  float *Ks = sm + 5 * kCh; /* until A is written */
  const lane_ids l = lanes();
  const gate_in gx = gates_load(g, beta, t0, L, h, p, l);

  /* k's plane by one bulk copy, completed on an mbarrier in the unused rows 3 and 4 of the gates' area:
   * one instruction where 8 cp.async a thread and their addressing were ~6 % of phase 0's
   * instructions (docs/perf-prefill.md part 31) */
  uint64_t *kbar = reinterpret_cast<uint64_t *>(sm + 3 * kCh);
  if (QKH && l.tid == 0) {
    sm90::mbar_init(kbar);
    sm90::bulk_copy(Ks, recA + kPlaneQK, kPlaneQK, kbar);
  }
  if (!QKH) { /* the chunk's K rows into shared memory (zero past L tokens) */
    const unsigned c = 4 * (l.tid & 31);
    const uint32_t ks = sm80::smem_u32(Ks + l.w * kLdS + c);
#pragma unroll 4
    for (unsigned rr = l.w; rr < kCh; rr += 4) {
      const uint32_t off = (rr - l.w) * kLdS * 4, n = rr < L ? 16u : 0u;
      sm80::cp_async16(ks + off, K + (rr < L ? rr * p.C + c : 0), n);
    }
    sm80::cp_commit();
  }
  const float G = chunk_gates(gs, bs, sw, gx, l);
  if (l.tid < kCh) {
    gs[l.tid] = G * kLog2e;
    reinterpret_cast<float *>(recB + kBG)[l.tid] = G * kLog2e;
  }
  sm80::cp_wait<0>();
  __syncthreads();
  if (QKH) sm90::mbar_wait(kbar, 0); /* after the barrier: thread 0 initialised it before chunk_gates' */
  /* q and k in half, once a key head: 16-byte word i = ((tok/8) 16 + d/8) 8 + tok%8 holds (tok, d..d+7) */
  if (!QKH && h % r == 0) {
    static_assert(kPlaneQK / 16 % kBlock == 0, "whole rounds");
#pragma unroll
    for (unsigned i = l.tid; i < kPlaneQK / 16; i += kBlock) {
      const unsigned tok = (i / 128) * 8 + i % 8, d = 8 * ((i / 8) % 16);
      const bool in = tok < L;
      const float4 q0 = in ? __ldg(reinterpret_cast<const float4 *>(Q + tok * p.C + d)) : make_float4(0, 0, 0, 0);
      const float4 q1 = in ? __ldg(reinterpret_cast<const float4 *>(Q + tok * p.C + d + 4)) : make_float4(0, 0, 0, 0);
      const float *kr = Ks + tok * kLdS + d; /* zero past L */
      *reinterpret_cast<uint4 *>(recA + 16 * i) =
          make_uint4(f16x2_rn(q0.x, q0.y), f16x2_rn(q0.z, q0.w), f16x2_rn(q1.x, q1.y), f16x2_rn(q1.z, q1.w));
      *reinterpret_cast<uint4 *>(recA + kPlaneQK + 16 * i) =
          make_uint4(f16x2_rn(kr[0], kr[1]), f16x2_rn(kr[2], kr[3]), f16x2_rn(kr[4], kr[5]), f16x2_rn(kr[6], kr[7]));
    }
  }
  /* K K^T and A.  From k's plane on the four warps, five of the twenty 16x8 tiles on and below the
   * diagonal each (row tile: column tiles): warp 0 0: 0-1 and 3: 0-2, warp 1 3: 3-7, warp 2 1: 0-3
   * and 2: 0, warp 3 2: 1-5 (on two warps, the others waited a quarter of phase 0 at the barrier
   * after A: docs/perf-prefill.md part 30); from f32 K on warps 0 and 1 (row tiles 0, 3 and 1, 2),
   * as prep_chunk's fp16 records.  Each tile's products in the same order either way. */
  float acc0[2][8][4];
  bool grow = false; /* a token whose I - beta k k^T may stretch the state (beta |k|^2 outside [0, 2]) */
  if (QKH) {
    const unsigned char *kp = reinterpret_cast<const unsigned char *>(Ks);
    if (l.w == 0) kkt_tiles_plane<0, 0, 2, 3, 0, 3>(acc0, kp, l);
    if (l.w == 1) kkt_tiles_plane<3, 3, 8, 3, 8, 8>(acc0, kp, l);
    if (l.w == 2) kkt_tiles_plane<1, 0, 4, 2, 0, 1>(acc0, kp, l);
    if (l.w == 3) kkt_tiles_plane<2, 1, 6, 2, 6, 6>(acc0, kp, l);
    __syncthreads(); /* A is written where K was */
    if (l.w == 0) grow = a_tiles<0, 0, 2, 3, 0, 3>(acc0, As, gs, bs, L, l);
    if (l.w == 1) grow = a_tiles<3, 3, 8, 3, 8, 8>(acc0, As, gs, bs, L, l);
    if (l.w == 2) grow = a_tiles<1, 0, 4, 2, 0, 1>(acc0, As, gs, bs, L, l);
    if (l.w == 3) grow = a_tiles<2, 1, 6, 2, 6, 6>(acc0, As, gs, bs, L, l);
  } else {
    if (l.w == 0) kkt_rows_f16<0>(acc0, Ks, Ks, p.dk, l);
    if (l.w == 1) kkt_rows_f16<1>(acc0, Ks, Ks, p.dk, l);
    __syncthreads(); /* A is written where K was */
    if (l.w == 0) grow = a_tiles<0, 0, 2, 3, 0, 8>(acc0, As, gs, bs, L, l);
    if (l.w == 1) grow = a_tiles<1, 0, 4, 2, 0, 6>(acc0, As, gs, bs, L, l);
  }
  const bool grows = __syncthreads_or(grow);
  if (l.tid == 0) /* the chunk's bound, for the segments' passes (wh_forget_from) */
    wh_bounds(ws, nc, p)[j * p.nv + h] = grows ? __int_as_float(0x7f800000) : gs[kCh - 1];
  /* Tb = T diag(beta) in half: 16-byte words of 8 columns; blocks above the diagonal zero.  T's
   * 8 columns by two 16-byte reads: a quarter-warp's 8 rows in distinct banks (by 8-byte reads,
   * 2-way conflicts: docs/perf-prefill.md part 30).  Word i = ((rr/8) 8 + cg) 8 + rr%8; the words
   * of rows 0..47 (i < 384) by warps 1-3 while warp 0 ends the inverse's last block, T_30. */
  auto tb_word = [&](unsigned i) {
    const unsigned rr = (i / 64) * 8 + i % 8, cg = (i / 8) % 8;
    uint32_t wv[4] = {0u, 0u, 0u, 0u};
    if (cg / 2 <= rr / 16) {
      const float4 x0 = *reinterpret_cast<const float4 *>(Xs + rr * kLdA + 8 * cg);
      const float4 x1 = *reinterpret_cast<const float4 *>(Xs + rr * kLdA + 8 * cg + 4);
      const float *b = bs + 8 * cg;
      wv[0] = f16x2_rn(x0.x * b[0], x0.y * b[1]), wv[1] = f16x2_rn(x0.z * b[2], x0.w * b[3]);
      wv[2] = f16x2_rn(x1.x * b[4], x1.y * b[5]), wv[3] = f16x2_rn(x1.z * b[6], x1.w * b[7]);
    }
    *reinterpret_cast<uint4 *>(recB + kBTb + 16 * i) = make_uint4(wv[0], wv[1], wv[2], wv[3]);
  };
  static_assert(kTb / 16 == 512 && kBlock == 128, "Tb's 512 words: 384 of rows 0..47, then 128");
  invert_unit_lower(As, Xs, l, [&] {
    for (unsigned i = l.tid - 32; i < 384; i += 96) tb_word(i);
  });
  tb_word(384 + l.tid);
}

/* What a scan block runs for value head h: chunks [cb, ce) (cb < ce) of sequence seq, from the
 * state sin (f32 [dk, dv]; zero where null, the identity where ident), on v or on v = 0 (vzero),
 * its last state into sout (f32 [dk, dv], where not null); o stored or not by wh_scan's OUTS.  The whole
 * sequence from and to its slot is one such run; the segments' passes are others
 * (delta_rule_prefill_chunked_wh_seg). */
struct wh_run {
  unsigned seq, h, cb, ce;
  const float *sin;
  float *sout;
  bool ident, vzero;
};

/* The chunks of sequence seq (0 past the sequences or where it is empty). */
__device__ __forceinline__ unsigned wh_chunks(const int *cu, unsigned seq, const shape &p) {
  if (seq >= p.s) return 0;
  const int ts = cu[seq], te = cu[seq + 1];
  return ts < 0 || te <= ts ? 0u : (unsigned)(((size_t)(te - ts) + kCh - 1) / kCh);
}

/* Phase 1 of one run (above), o stored where OUTS (a constant: as a runtime choice the outputs'
 * work spilled registers in the segments' entry). */
template <bool OUTS>
__device__ __forceinline__ void wh_scan(unsigned char *smem, bf16 *o, const int *cu, const unsigned char *ws,
                                        const uint16_t *vh, const shape &p, const wh_run &run) {
  using namespace wh;
  const unsigned tid = threadIdx.x, wg = tid / 128, w = (tid % 128) / 32, lane = tid % 32;
  const unsigned seq = run.seq, h = run.h;
  const int ts = cu[seq], te = cu[seq + 1];
  const unsigned nch = run.ce - run.cb;
  const size_t j0 = first_chunk(cu, seq) + run.cb, nc = first_chunk(cu, p.s);
  const unsigned kh = h / (p.nv / p.nk);
  const uint32_t s0 = sm90::smem_u32(smem);
  int *sigma = reinterpret_cast<int *>(smem + EX), *kshift = sigma + 2;
  float *sred = reinterpret_cast<float *>(smem + EX + 16), *vred = sred + 16; /* [2][8], [2][4] */
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + BAR), *empty = full + 2;
  auto stage_of = [&](unsigned c) -> uint32_t { return RS + (c & 1) * kStage; }; /* chunk c's records */
  auto v_of = [&](unsigned c) -> uint32_t { return v_planes(s0) + (c & 1) * kVBytes; }; /* its V planes */
  auto t0_of = [&](unsigned c) -> size_t { return (size_t)ts + (size_t)(run.cb + c) * kCh; }; /* chunk c's first token */
  auto len_of = [&](unsigned c) -> unsigned { /* and its tokens */
    const size_t left = (size_t)te - t0_of(c);
    return left < kCh ? (unsigned)left : kCh;
  };
  /* chunk c's inputs into its stage, by one thread: records A and B */
  const unsigned char *recA = ws + (j0 * p.nk + kh) * kRecA, *recB = ws + nc * p.nk * kRecA + (j0 * p.nv + h) * kRecB;
  auto load_in = [&](unsigned c) {
    unsigned char *b = smem + stage_of(c);
    sm90::bulk_copy(b, recA + (size_t)c * p.nk * kRecA, kRecA, &full[c & 1]);
    sm90::bulk_copy(b + kRecA, recB + (size_t)c * p.nv * kRecB, kRecB, &full[c & 1]);
  };
  if (tid == 0) { /* two copies and the outputs' arrival with v's bytes a chunk */
    for (unsigned b = 0; b < 2; b++) sm90::mbar_init_count(&full[b], 3), sm90::mbar_init_count(&empty[b], 4);
    sm90::mbar_init_fence();
    for (unsigned c = 0; c < 2 && c < nch; c++) load_in(c);
  }
  __syncthreads();
  auto wait_in = [&](unsigned c) { sm90::mbar_wait(&full[c & 1], (c >> 1) & 1); };
  auto done_in = [&](unsigned c) {
    if (tid % 128 == 0) sm90::mbar_arrive(&empty[c & 1]);
  };
  const unsigned g = lane >> 2, t = lane & 3;
  const unsigned ra = 16 * w + g, rb = ra + 8; /* this thread's token rows (values, outputs) */

  if (wg == 0 || wg == 3) { /* the state */
    const unsigned half = wg == 3, sw = 4 * half + w;
    float s[64];
#pragma unroll
    for (unsigned jn = 0; jn < 16; jn++)
#pragma unroll
      for (unsigned hf = 0; hf < 2; hf++) {
        const unsigned m = 64 * half + 16 * w + g + 8 * hf, n = 8 * jn + 2 * t;
        float2 v = ld2_if(run.sin != nullptr, run.sin + (size_t)m * kDv + n);
        if (run.ident) v = make_float2(m == n ? 1.0f : 0.0f, m == n + 1 ? 1.0f : 0.0f);
        s[4 * jn + 2 * hf] = v.x, s[4 * jn + 2 * hf + 1] = v.y;
      }
    int sig = f16::rescale_by(group_max<8>(amax64(s), sred, sw, B_STATE, lane), 0, 5);
    scale64(s, f16::exp2i(sig));
    put_b(s0 + S0, 8 * half + 2 * w, s, 1.0f, 1.0f, lane);
    if (tid == 0) sigma[0] = sig;
    sm90::fence_proxy_async();
    sm90::bar_arrive(B_S_VAL, 384);
    sm90::bar_arrive(B_S_OUT0, 384);
    /* K^T as an MN-major A: this half's 64 rows of d start 8 core matrices on */
    const uint64_t dKt = sm90::desc_plain(s0 + SK + half * 1024, 2048, 128);
    const uint64_t dDn = sm90::desc_plain(s0 + VN, KC, 128);
    int pend = 0; /* the last plane's exponent change, which the accumulators take with the decay */
    for (unsigned c = 0; c < nch; c++) {
      wait_in(c);
      const float gl = ex2_ftz(reinterpret_cast<const float *>(smem + stage_of(c) + SG)[kCh - 1]);
      sm90::bar_sync(B_D_STATE, 384);
      const int k = kshift[c & 1];
      sig += k;
      if (k + pend >= -126 && k + pend <= 126) {
        scale64(s, gl * f16::exp2i(k + pend));
      } else { /* both far from 0 (a tiny v raised R's exponent as the state fell): two steps */
        scale64(s, gl * f16::exp2i(k));
        scale64(s, f16::exp2i(pend));
      }
      sm90::pin(s);
      sm90::wgmma_fence();
      const uint64_t ka = dKt + (stage_of(c) >> 4);
#pragma unroll
      for (unsigned kb = 0; kb < 4; kb++) sm90::wgmma_f16x<128>::run_ta(s, ka + kb * kStepTok, dDn + kb * kStepB);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(s);
      done_in(c);
      if (c >= 1) sm90::bar_sync((c - 1) & 1 ? B_S_FREE1 : B_S_FREE0, 384); /* Q S of chunk c - 1 read this plane */
      if (c + 1 < nch) {
        /* S into the next plane as it is, then its exponent (the maxima by parity: a warp a chunk
         * ahead writes the other slot), so that the plane's stores drain while the maximum is
         * found (docs/perf-prefill.md part 30).  The exponent moves only where the largest |S| has
         * left [2^3, 2^9) (into [2^5, 2^6) then), so that most chunks keep the plane as put, with
         * no multiply on the chain (part 29); the others put it again, times 2^pend.  The plane is
         * S times 2^pend, the accumulators take it with the next decay. */
        const uint32_t sp = s0 + S0 + ((c + 1) & 1) * kSPlane;
        put_b<false>(sp, 8 * half + 2 * w, s, 1.0f, 1.0f, lane);
        const float mx = group_max<8>(amax64(s), sred + 8 * ((c + 1) & 1), sw, B_STATE, lane);
        pend = mx >= 512.0f || mx < 8.0f ? f16::rescale_by(mx, sig, 5) : 0;
        if (pend != 0) put_b(sp, 8 * half + 2 * w, s, f16::exp2i(pend), f16::exp2i(pend), lane);
        sig += pend;
        if (tid == 0) sigma[(c + 1) & 1] = sig;
        sm90::fence_proxy_async();
        sm90::bar_arrive(B_S_VAL, 384);
        sm90::bar_arrive(B_S_OUT0 + ((c + 1) & 1), 384);
      }
    }
    sm90::bar_sync((nch - 1) & 1 ? B_S_FREE1 : B_S_FREE0, 384);
    if (run.sout) {
      const float fi = f16::exp2i(-sig);
#pragma unroll
      for (unsigned jn = 0; jn < 16; jn++)
#pragma unroll
        for (unsigned hf = 0; hf < 2; hf++) {
          const unsigned m = 64 * half + 16 * w + g + 8 * hf;
          *reinterpret_cast<float2 *>(run.sout + (size_t)m * kDv + 8 * jn + 2 * t) =
              make_float2(s[4 * jn + 2 * hf] * fi, s[4 * jn + 2 * hf + 1] * fi);
        }
    }
  } else if (wg == 1) { /* the values */
    float a[64];
    const uint64_t dS = sm90::desc_plain(s0 + S0, KC, 128), dR = sm90::desc_plain(s0 + VN, KC, 128);
    for (unsigned c = 0; c < nch; c++) {
      const unsigned L = len_of(c);
      wait_in(c);
      const uint32_t st = stage_of(c);
      const float *G2 = reinterpret_cast<const float *>(smem + st + SG);
      const float ga = G2[ra], gb = G2[rb], gL = G2[kCh - 1];
      const float ea = ex2_ftz(ga), eb = ex2_ftz(gb), da = ex2_ftz(gL - ga), db = ex2_ftz(gL - gb);
      const uint64_t dK = sm90::desc_plain(s0 + st + SK, 128, 2048), dTb = sm90::desc_plain(s0 + st + STb, 128, 1024);
      sm90::bar_sync(B_S_VAL, 384);
      const int sig = sigma[c & 1];
      const uint64_t dSc = dS + (((c & 1) * kSPlane) >> 4);
      sm90::wgmma_fence();
      sm90::wgmma_f16x<128>::first(a, dK, dSc);
#pragma unroll
      for (unsigned kb = 1; kb < 8; kb++) sm90::wgmma_f16x<128>::run(a, dK + kb * kStepK, dSc + kb * kStepB);
      sm90::wgmma_commit();
      /* V's pairs of this thread's accumulators while the product runs: i = 8m + 2q is row ra
       * (q even) or rb, columns 16m + 8 (q / 2) + 2t and on, which is what ldmatrix gives lane
       * 4g + t of the 8x8 matrices (ra's rows, word 2m), (rb's, 2m), (ra's, 2m + 1), (rb's, 2m + 1):
       * lane l names row 16w + l % 8 + 8 ((l / 8) % 2) of the first rows' plane m / 4, at word
       * (2 (m % 4) + l / 16) ^ (l % 8) of the swizzle, = a base's bits 4..6 XOR 2 (m % 4) */
      uint32_t vv[32];
      const uint32_t vl = v_of(c) + (16 * w + (lane & 7) + 8 * ((lane >> 3) & 1)) * 128 +
                          (((lane >> 4) ^ (lane & 7)) << 4);
#pragma unroll
      for (unsigned m = 0; m < 8; m++)
        sm90::ldsm_x4(&vv[4 * m], (vl ^ (32 * (m % 4))) + (m / 4) * kVHalf);
      sm90::wgmma_wait0();
      sm90::pin(a);
      sm90::bar_arrive(B_KS0 + (c & 1), 256);
      /* R = V 2^sig - e^G (K S 2^sig), zero past L (a whole chunk without the test: 64 selects
       * off the chain) */
      const float fs = f16::exp2i(sig);
      auto r_of = [&](auto whole) {
#pragma unroll
        for (unsigned m = 0; m < 8; m++) {
#pragma unroll
          for (unsigned q = 0; q < 4; q++) {
            const float2 x = f16x2_to_f32(vv[4 * m + q]);
            const unsigned i = 8 * m + 2 * q; /* accumulators i, i + 1: row ra (q even) or rb */
            const bool upper = q & 1;
            const float e = upper ? eb : ea;
            const bool in = decltype(whole)::value || (upper ? rb : ra) < L;
            a[i] = in ? (run.vzero ? 0.0f : x.x * fs) - e * a[i] : 0.0f;
            a[i + 1] = in ? (run.vzero ? 0.0f : x.y * fs) - e * a[i + 1] : 0.0f;
          }
        }
      };
      if (L == kCh)
        r_of(whole_chunk<true>{});
      else
        r_of(whole_chunk<false>{});
      /* R into its plane as it is, then its largest |value|: past 2^15 (v far above the state) or
       * below 2^-3 (v far below it, or a zero state: half's subnormals would keep few of R's bits)
       * it moves e for this chunk and R is put again.  The maximum's barrier is also the one after
       * which the plane is whole, and the stores drain while the maximum is found (part 30). */
      put_b(s0 + VN, 2 * w, a, 1.0f, 1.0f, lane);
      sm90::fence_proxy_async();
      int k = 0;
      {
        const float mr = group_max<4>(amax64(a), vred, w, B_VAL, lane);
        if (mr >= 32768.0f || mr < 0.125f) {
          k = f16::rescale_by(mr, sig, 5);
          scale64(a, f16::exp2i(k));
          put_b(s0 + VN, 2 * w, a, 1.0f, 1.0f, lane);
          sm90::fence_proxy_async();
          sm90::bar_sync(B_VAL, 128);
        }
      }
      sm90::wgmma_fence();
      sm90::wgmma_f16x<128>::first(a, dTb, dR);
#pragma unroll
      for (unsigned kb = 1; kb < 4; kb++) sm90::wgmma_f16x<128>::run(a, dTb + kb * kStepK, dR + kb * kStepB);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(a);
      done_in(c);
      /* Dn for the state first (the chain), into the plane R was in: the state's last read of it,
       * chunk c - 1's K^T Dn, ended before it put S for this chunk.  Put as D is, then D's range
       * tested while the stores drain (part 30): past 2^15 e moves for this chunk and Dn is put
       * again. */
      put_b(s0 + VN, 2 * w, a, da, db, lane); /* rows ra, rb times e^(G_L - G) */
      if (sm90::bar_any(B_VAL, 128, amax64(a) >= 32768.0f)) {
        const int k2 = f16::rescale_by(group_max<4>(amax64(a), vred + 4, w, B_VAL, lane), sig + k, 5);
        scale64(a, f16::exp2i(k2));
        k += k2;
        put_b(s0 + VN, 2 * w, a, da, db, lane);
      }
      if (tid == 128) kshift[c & 1] = k;
      sm90::fence_proxy_async();
      sm90::bar_arrive(B_D_STATE, 384);
      /* then D for the outputs, once their M D of chunk c - 1 is done */
      if (c > 0) sm90::bar_sync(B_D_FREE, 256);
      put_b(s0 + VD, 2 * w, a, 1.0f, 1.0f, lane);
      sm90::fence_proxy_async();
      sm90::bar_arrive(B_D_OUT0 + (c & 1), 256);
    }
    sm90::bar_sync(B_D_FREE, 256);
  } else if (wg == 2) { /* the outputs */
    float a[64], pq[32];
    const uint64_t dS = sm90::desc_plain(s0 + S0, KC, 128), dD = sm90::desc_plain(s0 + VD, KC, 128);
    const uint64_t dM = sm90::desc_plain(s0 + PO, 128, 1024);
    const size_t ld = (size_t)p.nv * p.dv;
    /* v's 64 rows of chunk c at the head's columns into its V planes, by the thread that made the
     * map (its arrival with their bytes, then a copy a plane; rows past L, the next sequence's or
     * zeros past vh's end, the values read as zeros; none for a run on v = 0) */
    const unsigned char *vmap = metrale_gdn_wh_maps[sm90::sm_id() % 1024u];
    auto load_v = [&](unsigned c) {
      sm90::mbar_expect_tx(&full[c & 1], run.vzero ? 0u : kVBytes);
      if (run.vzero) return;
      const int c0 = (int)(h * kDv), r0 = (int)t0_of(c);
      sm90::tma_load_2d(v_of(c), vmap, c0, r0, &full[c & 1]);
      sm90::tma_load_2d(v_of(c) + kVHalf, vmap, c0 + 64, r0, &full[c & 1]);
    };
    if (w == 0) { /* v's map [T, nv dv] into this SM's slot (one block an SM), as gemm_ws.cuh's producer */
      uint64_t *map = reinterpret_cast<uint64_t *>(smem + MAP);
      if (lane < METRALE_TMA_BYTES / 8)
        map[lane] = reinterpret_cast<const uint64_t *>(metrale_tma_templates[METRALE_TMA_H16_K64_R64])[lane];
      __syncwarp();
      if (lane == 0) sm90::tmap_set_2d(map, vh, p.nv * kDv, (uint32_t)cu[p.s], ld * 2);
      __syncwarp();
      sm90::tmap_publish(const_cast<unsigned char *>(vmap), map);
      if (lane == 0) {
        sm90::tmap_acquire(vmap);
        for (unsigned c = 0; c < 2 && c < nch; c++) load_v(c);
      }
      __syncwarp();
    }
    for (unsigned c = 0; c < nch; c++) {
      const size_t t0 = t0_of(c);
      const unsigned L = len_of(c);
      wait_in(c);
      const uint32_t st = stage_of(c);
      const float *G2 = reinterpret_cast<const float *>(smem + st + SG);
      const float ga = G2[ra], gb = G2[rb];
      const uint64_t dQ = sm90::desc_plain(s0 + st + SQ, 128, 2048), dK = sm90::desc_plain(s0 + st + SK, 128, 2048);
      sm90::bar_sync(B_OUT, 128); /* the last chunk's O has left the stage */
      if (OUTS) { /* M = lower((Q K^T) e^(G_r - G_c)) into its plane */
        sm90::wgmma_fence();
        sm90::wgmma_f16x<64>::first(pq, dQ, dK);
#pragma unroll
        for (unsigned kb = 1; kb < 8; kb++) sm90::wgmma_f16x<64>::run(pq, dQ + kb * kStepK, dK + kb * kStepK);
        sm90::wgmma_commit();
        sm90::wgmma_wait0();
        sm90::pin(pq);
#pragma unroll
        for (unsigned i = 0; i < 32; i++) {
          const unsigned row = (i & 2) ? rb : ra, col = 8 * (i / 4) + 2 * t + (i & 1);
          pq[i] = col <= row ? pq[i] * ex2_ftz(((i & 2) ? gb : ga) - G2[col]) : 0.0f;
        }
        put_a64(s0 + PO, w, pq, lane);
        sm90::fence_proxy_async();
      }
      sm90::bar_sync(B_OUT, 128);
      sm90::bar_sync(B_S_OUT0 + (c & 1), 384);
      /* S of chunk c is out, so the state is done with chunk c - 1 (and so is everyone): chunk
       * c + 1 into its stage, a chain step before the values need it (waited for only at the
       * end of each chunk, the copies came late and the state and the values waited for them) */
      if (w == 0 && lane == 0 && c >= 1 && c + 1 < nch) {
        sm90::mbar_wait(&empty[(c - 1) & 1], ((c - 1) >> 1) & 1);
        load_in(c + 1);
        load_v(c + 1);
      }
      __syncwarp();
      const int sig = sigma[c & 1];
      sm90::bar_sync(B_KS0 + (c & 1), 256);
      const uint64_t dSc = dS + (((c & 1) * kSPlane) >> 4);
      if (OUTS) {
        sm90::wgmma_fence();
        sm90::wgmma_f16x<128>::first(a, dQ, dSc);
#pragma unroll
        for (unsigned kb = 1; kb < 8; kb++) sm90::wgmma_f16x<128>::run(a, dQ + kb * kStepK, dSc + kb * kStepB);
        sm90::wgmma_commit();
        sm90::wgmma_wait0();
        sm90::pin(a);
      }
      sm90::bar_arrive((c & 1) ? B_S_FREE1 : B_S_FREE0, 384);
      sm90::bar_sync(B_D_OUT0 + (c & 1), 256);
      const int k = kshift[c & 1];
      if (OUTS) {
        const float fk = f16::exp2i(k), ea = ex2_ftz(ga) * fk, eb = ex2_ftz(gb) * fk;
#pragma unroll
        for (unsigned i = 0; i < 64; i++) a[i] *= (i & 2) ? eb : ea;
        sm90::pin(a);
        sm90::wgmma_fence();
#pragma unroll
        for (unsigned kb = 0; kb < 4; kb++) sm90::wgmma_f16x<128>::run(a, dM + kb * kStepK, dD + kb * kStepB);
        sm90::wgmma_commit();
        sm90::wgmma_wait0();
        sm90::pin(a);
      }
      done_in(c);
      sm90::bar_arrive(B_D_FREE, 256);
      if (!OUTS) continue;
      /* O out: staged by rows (stmatrix), then 16-byte words, a row's 16 by 16 threads (the bulk
       * engine's row copies, one a lane, were issued lane after lane: ~2/3 of this warpgroup's
       * step) */
      put_o(s0 + PO, w, a, f16::exp2i(-(sig + k)), lane);
      sm90::bar_sync(B_OUT, 128);
      const unsigned tw = tid % 128;
#pragma unroll
      for (unsigned i = 0; i < 8; i++) {
        const unsigned rr = 8 * i + tw / 16, cw = tw % 16;
        if (rr < L) {
          const uint4 v = *reinterpret_cast<const uint4 *>(smem + PO + rr * 256 + 16 * (cw ^ (rr & 7)));
          *reinterpret_cast<uint4 *>(o + (t0 + rr) * ld + (size_t)h * kDv + 8 * cw) = v;
        }
      }
    }
  }
}

/* ---- delta_rule_prefill_chunked_wh_seg: a sequence in nseg segments -------------------------
 * One (sequence, value head) of the scan above keeps one SM busy for all of its chunks, so one
 * sequence of nv = 32 heads fills a quarter of the GPU.  A chunk's update is affine in the state,
 * S' = A S + B with A = e^(G_L) I - K^T diag(e^(G_L - G)) Tb diag(e^G) K (dk x dk) and
 * B = K^T diag(e^(G_L - G)) Tb V, so a segment of chunks maps its first state X to M X + F, where
 * F is the segment run from a zero state and M the segment run from the identity (as dv = dk
 * columns) on v = 0.  So:
 *   phase 1: a block a (sequence, value head, kind): segment 0 from the slot's state with its
 *     outputs, its last state X_1 into the workspace; for segments 1..nseg-2, F_j and M_j;
 *   phase 2: X_(j+1) = M_j X_j + F_j in f32, j = 1..nseg-2 (a block a 32 columns of a head);
 *   phase 3: segments 1..nseg-1 from X_j with their outputs, the last one's state into the slot.
 * Per (sequence, value head) the workspace holds 2 nseg - 3 matrices of [dk, dv] f32 after the
 * records (NC nv 147584 bytes): slot 0 X_1, slot 2j - 1 F_j (X_(j+1) once phase 2 has run), slot
 * 2j M_j.  Empty segments (a sequence of fewer than nseg chunks) give F = 0, M = I and X copied. */
namespace wh {
constexpr unsigned kMat = kDk * kDv; /* floats of one state */
}  // namespace wh

/* What the segments' passes may leave out: a share of the state that its gates bound below
 * 2^-kForget of what it was (phase 1's F_j from a later chunk, M_j as zero; kernels.def). */
namespace wh {
constexpr float kForget = 64.0f;
}  // namespace wh

/* Chunks [cb, ce) of the sequence whose first chunk is j0, value head h: the last chunk c0 from
 * which the chunks' bounds (wh_bounds) sum to -kForget or below, so that what the state held at c0
 * is at most 2^-kForget of it at ce; ce where none does.  By each warp alone (its lanes
 * 32 chunks at a time from the end, their suffix sums by shuffles), the same in every warp. */
__device__ __forceinline__ unsigned wh_forget_from(const float *bnd, size_t j0, const shape &p, unsigned h,
                                                   unsigned cb, unsigned ce) {
  const unsigned lane = threadIdx.x % 32;
  float acc = 0.0f;
  for (unsigned top = ce; top > cb;) {
    const unsigned n = top - cb < 32 ? top - cb : 32u;
    float b = lane < n ? bnd[(j0 + top - 1 - lane) * p.nv + h] : 0.0f; /* lane 0: chunk top - 1 */
#pragma unroll
    for (unsigned o = 1; o < 32; o <<= 1) {
      const float v = __shfl_up_sync(0xffffffffu, b, o);
      if (lane >= o) b += v;
    }
    b += acc; /* the bounds of chunks top - 1 - lane .. ce - 1 */
    const unsigned hit = __ballot_sync(0xffffffffu, lane < n && b <= -wh::kForget);
    if (hit) return top - 1 - (__ffs(hit) - 1);
    acc = __shfl_sync(0xffffffffu, b, 31);
    top -= n;
  }
  return ce;
}

/* The bounds of chunks [cb, ce) summed (by each warp alone, the same in every warp): M_j of a segment
 * whose sum is -kForget or below is at most 2^-kForget in norm. */
__device__ __forceinline__ float wh_bound_sum(const float *bnd, size_t j0, const shape &p, unsigned h, unsigned cb,
                                              unsigned ce) {
  float b = 0.0f;
  for (unsigned c = cb + threadIdx.x % 32; c < ce; c += 32) b += bnd[(j0 + c) * p.nv + h];
#pragma unroll
  for (unsigned o = 16; o > 0; o >>= 1) b += __shfl_xor_sync(0xffffffffu, b, o);
  return b;
}

/* Whether a segment of chunks [cb, ce) forgets its start: it is not empty and its bounds sum to
 * -kForget or below.  Phase 1 then leaves its M_j zero, and phase 2 skips the chain where every
 * M_j is: one test, so that the two agree. */
__device__ __forceinline__ bool wh_m_zero(const float *bnd, size_t j0, const shape &p, unsigned h, unsigned cb,
                                          unsigned ce) {
  return cb < ce && wh_bound_sum(bnd, j0, p, h, cb, ce) <= -wh::kForget;
}

/* Of a sequence's n chunks in nseg segments, segment 0 w0/16 as long as each other: segment j's
 * first chunk (kernels.def) */
__device__ __forceinline__ unsigned wh_first(unsigned n, unsigned nseg, unsigned w0, unsigned j) {
  constexpr unsigned E = METRALE_WH_W0_EQUAL;
  return j == 0 ? 0u : (unsigned)((size_t)n * (w0 + E * (j - 1)) / (w0 + E * (nseg - 1)));
}

/* Whether every head of the sequence whose n chunks start at j0 forgets the start of each of its
 * segments 1..nseg-2 as w0 = 1 cuts them (each segment's bounds sum to -kForget or below): then
 * those segments' M are zero and their F a few chunk steps, and the kernel takes w0 = 1, segment 0
 * nearly empty, so that phase 3 runs nearly the whole sequence in one wave of blocks (kernels.def;
 * docs/perf-prefill.md part 26).  By the whole block (each (segment, head) summed by a group of
 * threads), the same in every block of the sequence. */
__device__ __forceinline__ bool wh_forgets(const float *bnd, size_t j0, const shape &p, unsigned n, unsigned nseg) {
  const unsigned pairs = (nseg - 2) * p.nv;
  unsigned tpp = 32; /* threads a (segment, head): a power of 2, so that a group is within a warp */
  while (tpp > 1 && tpp * pairs > blockDim.x) tpp /= 2;
  bool all = true;
  for (unsigned base = 0; base < pairs * tpp; base += blockDim.x) { /* every thread goes round as often */
    const unsigned i = base + threadIdx.x, pr = i / tpp, part = i % tpp;
    float b = 0.0f;
    unsigned cb = 0, ce = 0;
    if (pr < pairs) {
      const unsigned j = 1 + pr / p.nv, h = pr % p.nv;
      cb = wh_first(n, nseg, 1, j), ce = wh_first(n, nseg, 1, j + 1);
      for (unsigned c = cb + part; c < ce; c += 8 * tpp) { /* eight loads in flight: this is on phase 1's path */
        float v[8];
#pragma unroll
        for (unsigned u = 0; u < 8; u++) v[u] = c + u * tpp < ce ? bnd[(j0 + c + u * tpp) * p.nv + h] : 0.0f;
#pragma unroll
        for (unsigned u = 0; u < 8; u++) b += v[u];
      }
    }
    for (unsigned o = tpp / 2; o > 0; o /= 2) b += __shfl_xor_sync(0xffffffffu, b, o);
    if (pr < pairs) all = all && cb < ce && b <= -wh::kForget;
  }
  return __syncthreads_and(all);
}

/* sequence seq, value head h's first matrix */
__device__ __forceinline__ float *wh_seg_mats(float *ws, const int *cu, const shape &p, unsigned nseg, unsigned seq,
                                              unsigned h) {
  const size_t recs = first_chunk(cu, p.s) * p.nv * kRec; /* floats of the records (kernels.def) */
  return ws + recs + ((size_t)seq * p.nv + h) * (2 * nseg - 3) * wh::kMat;
}

/* dst = src (zero where null; the identity where ident), by the block */
__device__ __forceinline__ void wh_fill(float *dst, const float *src, bool ident) {
  for (unsigned i = 4 * threadIdx.x; i < wh::kMat; i += 4 * blockDim.x) {
    float4 v = src ? *reinterpret_cast<const float4 *>(src + i) : make_float4(0, 0, 0, 0);
    if (ident) {
      const unsigned m = i / kDv, n = i % kDv; /* n .. n + 3 of row m */
      v = make_float4(m == n, m == n + 1, m == n + 2, m == n + 3);
    }
    *reinterpret_cast<float4 *>(dst + i) = v;
  }
}

/* Phase 2 for the 32 columns cq of one (sequence, value head): X_(j+1) = M_j X_j + F_j in f32 for
 * j = 1..nseg-2, each into F_j's slot.  512 threads in four groups of the reduction (k 32 g ..
 * 32 g + 31); a thread of a group keeps rows rt + 32 i (i < 4, rt = its index / 4) by 8 columns
 * (8 (index % 4) ..) in registers, so that 4 k take 12 shared-memory reads for 128 FMAs (the
 * form of a row a thread took 9 for 32 and was bound by them: docs/perf-prefill.md, part 24).
 * M_j comes by asynchronous copies into one of two buffers while M_(j-1) X_(j-1) runs.
 * Shared memory (floats): M [2][128][kLdM] (rows padded so that a warp's 8 rows fall in distinct
 * banks), X_j's columns [128][32], the groups' partial sums [4][128][32]. */
namespace wh {
constexpr unsigned kLdM = kDk + 4, kChainM = kDk * kLdM, kChainX = 2 * kChainM, kChainR = kChainX + kDk * 32,
                   kChainEnd = kChainR + 4 * kDk * 32;
static_assert(kChainEnd * 4 <= END, "phase 2's buffers fit in the scan's shared memory");
}  // namespace wh
__device__ __forceinline__ void wh_chain(float *sm, float *X, unsigned nseg, unsigned cq) {
  using namespace wh;
  float *xs = sm + kChainX, *red = sm + kChainR;
  const unsigned tid = threadIdx.x, g = tid / 128, rt = (tid % 128) / 4, ct = tid % 4;
  const unsigned orow = tid / 4, oc = 32 * cq + 8 * ct; /* the 8 outputs this thread sums */
  auto load_m = [&](unsigned j) { /* M_j into buffer j % 2 */
    const float *Mj = X + (size_t)(2 * j) * kMat;
    const uint32_t b = sm80::smem_u32(sm + (j % 2) * kChainM);
#pragma unroll
    for (unsigned i = tid; i < kMat / 4; i += 512)
      sm80::cp_async16(b + ((i / 32) * kLdM + 4 * (i % 32)) * 4, Mj + 4 * i, 16);
  };
  load_m(1);
  sm80::cp_commit();
  { /* X_1's columns */
    const float4 *x1 = reinterpret_cast<const float4 *>(X + (size_t)orow * kDv + oc);
    float4 *xd = reinterpret_cast<float4 *>(xs + orow * 32 + 8 * ct);
    xd[0] = x1[0];
    xd[1] = x1[1];
  }
  for (unsigned j = 1; j + 1 < nseg; j++) {
    if (j + 2 < nseg) load_m(j + 1);
    sm80::cp_commit();
    float *Fj = X + (size_t)(2 * j - 1) * kMat + (size_t)orow * kDv + oc;
    const float4 f0 = reinterpret_cast<const float4 *>(Fj)[0], f1 = reinterpret_cast<const float4 *>(Fj)[1];
    sm80::cp_wait<1>();
    __syncthreads(); /* M_j and X_j's columns in */
    const float *ms = sm + (j % 2) * kChainM;
    float acc[4][8];
#pragma unroll
    for (unsigned i = 0; i < 4; i++)
#pragma unroll
      for (unsigned c = 0; c < 8; c++) acc[i][c] = 0.0f;
#pragma unroll
    for (unsigned kk = 32 * g; kk < 32 * g + 32; kk += 4) {
      float4 m[4];
#pragma unroll
      for (unsigned i = 0; i < 4; i++) m[i] = *reinterpret_cast<const float4 *>(ms + (rt + 32 * i) * kLdM + kk);
#pragma unroll
      for (unsigned q = 0; q < 4; q++) {
        const float4 xa = *reinterpret_cast<const float4 *>(xs + (kk + q) * 32 + 8 * ct);
        const float4 xb = *reinterpret_cast<const float4 *>(xs + (kk + q) * 32 + 8 * ct + 4);
        const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
        for (unsigned i = 0; i < 4; i++) {
          const float mv = q == 0 ? m[i].x : q == 1 ? m[i].y : q == 2 ? m[i].z : m[i].w;
#pragma unroll
          for (unsigned c = 0; c < 8; c++) acc[i][c] = fmaf(mv, xv[c], acc[i][c]);
        }
      }
    }
#pragma unroll
    for (unsigned i = 0; i < 4; i++) {
      float4 *rd = reinterpret_cast<float4 *>(red + (g * kDk + rt + 32 * i) * 32 + 8 * ct);
      rd[0] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
      rd[1] = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
    __syncthreads(); /* the partial sums in; M_j's buffer and X_j's columns read */
    float4 s0 = f0, s1 = f1;
#pragma unroll
    for (unsigned gg = 0; gg < 4; gg++) {
      const float4 *rs = reinterpret_cast<const float4 *>(red + (gg * kDk + orow) * 32 + 8 * ct);
      const float4 a = rs[0], b = rs[1];
      s0 = make_float4(s0.x + a.x, s0.y + a.y, s0.z + a.z, s0.w + a.w);
      s1 = make_float4(s1.x + b.x, s1.y + b.y, s1.z + b.z, s1.w + b.w);
    }
    reinterpret_cast<float4 *>(Fj)[0] = s0; /* X_(j+1) over F_j, whose 8 values only this thread read */
    reinterpret_cast<float4 *>(Fj)[1] = s1;
    float4 *xd = reinterpret_cast<float4 *>(xs + orow * 32 + 8 * ct);
    xd[0] = s0;
    xd[1] = s1;
  }
}

__device__ __forceinline__ void wh_seg(unsigned char *smem, bf16 *o, float *state, const int *cu, const int *slots,
                                       float *ws, const uint16_t *vh, const shape &p, unsigned phase, unsigned nseg,
                                       unsigned w0) {
  using namespace wh;
  const unsigned h = blockIdx.x % p.nv, r = blockIdx.x / p.nv;
  const unsigned kinds = phase == 1 ? 2 * nseg - 3 : phase == 2 ? 4 : nseg - 1;
  const unsigned seq = r / kinds, k = r % kinds;
  const unsigned n = wh_chunks(cu, seq, p);
  if (n == 0) return; /* past the sequences, or an empty one: its state stays */
  const int slot = slots[seq];
  float *Sg = slot < 0 ? nullptr : state + ((size_t)slot * p.nv + h) * kMat;
  float *X = wh_seg_mats(ws, cu, p, nseg, seq, h);
  const float *bnd = wh_bounds(ws, first_chunk(cu, p.s), p);
  int *w0_taken = reinterpret_cast<int *>(const_cast<float *>(bnd) + first_chunk(cu, p.s) * p.nv); /* a sequence's */
  const size_t j0 = first_chunk(cu, seq);
  if (phase == 1) { /* w0 = 1 where the sequence forgets each segment's start (wh_forgets), for phase 3 too */
    if (wh_forgets(bnd, j0, p, n, nseg)) w0 = 1;
    if (k == 0 && h == 0 && threadIdx.x == 0) w0_taken[seq] = (int)w0;
  } else {
    w0 = (unsigned)w0_taken[seq];
  }
  auto first = [&](unsigned j) { return wh_first(n, nseg, w0, j); };
  const unsigned char *wsb = reinterpret_cast<const unsigned char *>(ws);
  if (phase == 1) { /* kind 0: segment 0 with its outputs; 2j - 1: F_j; 2j: M_j */
    const unsigned j = k == 0 ? 0 : (k + 1) / 2;
    const bool m = k > 0 && k % 2 == 0;
    float *dst = X + (size_t)k * kMat;
    unsigned cb = first(j);
    const unsigned ce = first(j + 1);
    if (k > 0 && cb < ce) { /* M_j zero where the segment forgets its start; F_j from the chunk where it does */
      if (m && wh_m_zero(bnd, j0, p, h, cb, ce)) {
        wh_fill(dst, nullptr, false);
        return;
      }
      if (!m) {
        const unsigned c0 = wh_forget_from(bnd, j0, p, h, cb, ce);
        if (c0 < ce) cb = c0;
      }
    }
    if (cb == ce) {
      wh_fill(dst, k == 0 ? Sg : nullptr, m);
      return;
    }
    const wh_run run = {seq, h, cb, ce, k == 0 ? Sg : nullptr, dst, m, m};
    if (k == 0)
      wh_scan<true>(smem, o, cu, wsb, vh, p, run);
    else
      wh_scan<false>(smem, o, cu, wsb, vh, p, run);
  } else if (phase == 2) {
    /* where phase 1 left every M_j zero (wh_m_zero), X_(j+1) = F_j is already in F_j's slot */
    bool zero = true;
    for (unsigned j = 1; j + 1 < nseg && zero; j++) zero = wh_m_zero(bnd, j0, p, h, first(j), first(j + 1));
    if (!zero) wh_chain(reinterpret_cast<float *>(smem), X, nseg, k);
  } else { /* segment j = k + 1 from X_j (slot 0 for j = 1, else 2j - 3), the last one into the slot */
    const unsigned j = k + 1;
    const float *xj = X + (size_t)(j == 1 ? 0 : 2 * j - 3) * kMat;
    float *dst = j + 1 == nseg ? Sg : nullptr;
    const unsigned cb = first(j), ce = first(j + 1);
    if (cb == ce) {
      if (dst) wh_fill(dst, xj, false);
      return;
    }
    const wh_run run = {seq, h, cb, ce, xj, dst, false, false};
    wh_scan<true>(smem, o, cu, wsb, vh, p, run);
  }
}
