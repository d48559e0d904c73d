/* gdn module: projection splits, q/k l2norm, gates and the gated delta rule.
 *
 * Everything before the recurrence is f32 (the mixer's f32 path: projections, q/k/v/z/
 * a/b, normalised q/k); the recurrent state is f32 and the output o bf16.
 *
 * Delta rule layout: one block per (sequence or decode slot, value head), one thread per
 * column j of the head's state S [dk, dv] (row-major, so a warp's column reads are
 * coalesced), the column held in registers for the whole sequence: the state is read
 * once and written once however many tokens the sequence has.  q and k of the current
 * token are staged in shared memory.
 *
 * The register path is compiled for dk = 64 and 128 (Qwen3-Next and Qwen3.5 use 128).
 * Any other dk takes a general path that splits each column over ceil(dk/32) threads
 * and adds their partial dot products through shared memory. */
#include "common.cuh"

namespace {
constexpr unsigned kDeltaBlock = mk_block("delta_rule_decode");
static_assert(kDeltaBlock == mk_block("delta_rule_prefill"), "one block size for both");
constexpr unsigned kRows = 32; /* general path: state rows per thread */
constexpr unsigned kL2Block = mk_block("l2norm_qk");

/* Where one (sequence, value head) finds its inputs. */
struct delta_head {
  bf16 *o;             /* o [T, nv, dv] */
  const float *qkv;    /* [T, C] (f32: the mixer's path up to the recurrence) */
  const float *g;      /* [T, nv] */
  const float *beta;   /* [T, nv] */
  float *S;            /* state[slot, h] [dk, dv], or NULL for slot -1 */
  size_t t0, t1;       /* tokens [t0, t1) */
  unsigned h, kh;      /* value head, the key head it reads */
  unsigned nk, nv, dk, dv;
  size_t C;            /* qkv row width */
};

/* Per token, with s' = S*exp(g):  d = beta*(v - k.s'),  S = s' + k d^T,  o = q.s' + (q.k) d.
 * Writing o that way lets the update k d^T wait until the next token's decay step,
 * so each token is one pass over the column (s = (s + k_prev d_prev) * exp(g)) instead
 * of two, and only the column itself stays live in registers.  q and k go through a
 * ring of three shared buffers: token t is written while t-1 (its k_prev) may still be
 * read, and one barrier per token orders it all. */
template <unsigned DK> __device__ __noinline__ void delta_seq_registers(const delta_head &p) {
  constexpr unsigned PER = (DK + kDeltaBlock - 1) / kDeltaBlock; /* q,k elements each thread stages */
  __shared__ __align__(16) float qs[3][DK], ks[3][DK];
  for (unsigned j0 = 0; j0 < p.dv; j0 += kDeltaBlock) {
    const unsigned j = j0 + threadIdx.x;
    const bool active = j < p.dv;
    float s[DK]; /* S[:, j], minus the pending k_prev d_prev */
#pragma unroll
    for (unsigned i = 0; i < DK; i++) s[i] = p.S && active ? p.S[(size_t)i * p.dv + j] : 0.0f;
    for (unsigned i = threadIdx.x; i < DK; i += kDeltaBlock) ks[2][i] = 0.0f; /* no k_prev yet */

    /* The next token's inputs are loaded into registers while the current one is
     * computed, so a token's global loads never stall the sequential scan. */
    float next_q[PER], next_k[PER], next_v = 0.0f, next_g = 0.0f, next_b = 0.0f;
    auto fetch = [&](size_t t) {
      const float *row = p.qkv + t * p.C;
#pragma unroll
      for (unsigned r = 0; r < PER; r++) {
        const unsigned i = threadIdx.x + r * kDeltaBlock;
        next_q[r] = i < DK ? row[(size_t)p.kh * DK + i] : 0.0f;
        next_k[r] = i < DK ? row[(size_t)(p.nk + p.kh) * DK + i] : 0.0f;
      }
      next_v = active ? row[(size_t)2 * p.nk * DK + (size_t)p.h * p.dv + j] : 0.0f;
      next_g = p.g[t * p.nv + p.h];
      next_b = p.beta[t * p.nv + p.h];
    };
    if (p.t0 < p.t1) fetch(p.t0);

    float d_prev = 0.0f;
    unsigned cur = 0, prev = 2;
    for (size_t t = p.t0; t < p.t1; t++) {
#pragma unroll
      for (unsigned r = 0; r < PER; r++) {
        const unsigned i = threadIdx.x + r * kDeltaBlock;
        if (i < DK) {
          qs[cur][i] = next_q[r];
          ks[cur][i] = next_k[r];
        }
      }
      const float v = next_v, decay = expf(next_g), b = next_b;
      if (t + 1 < p.t1) fetch(t + 1);
      __syncthreads();
      if (active) {
        float kv[4] = {0.0f, 0.0f, 0.0f, 0.0f}, qv[4] = {0.0f, 0.0f, 0.0f, 0.0f},
              qk[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* independent chains */
#pragma unroll
        for (unsigned i = 0; i < DK; i++) {
          const float ki = ks[cur][i], qi = qs[cur][i];
          s[i] = fmaf(ks[prev][i], d_prev, s[i]) * decay;
          kv[i % 4] = fmaf(ki, s[i], kv[i % 4]);
          qv[i % 4] = fmaf(qi, s[i], qv[i % 4]);
          qk[i % 4] = fmaf(qi, ki, qk[i % 4]);
        }
        const float d = b * (v - ((kv[0] + kv[1]) + (kv[2] + kv[3])));
        const float o = ((qv[0] + qv[1]) + (qv[2] + qv[3])) + ((qk[0] + qk[1]) + (qk[2] + qk[3])) * d;
        p.o[(t * p.nv + p.h) * p.dv + j] = f32_to_bf16(o);
        d_prev = d;
      }
      prev = cur;
      cur = cur == 2 ? 0 : cur + 1;
    }
    if (p.S && active) {
#pragma unroll
      for (unsigned i = 0; i < DK; i++) p.S[(size_t)i * p.dv + j] = fmaf(ks[prev][i], d_prev, s[i]);
    }
    __syncthreads(); /* the next column group rewrites the buffers */
  }
}

/* Any dk up to kRows * kDeltaBlock: thread (column jj, chunk c) holds rows
 * c*32..c*32+31 of column j0 + jj. */
__device__ __noinline__ void delta_seq_general(const delta_head &p) {
  __shared__ float part[kDeltaBlock];
  const unsigned nch = p.dk ? (p.dk + kRows - 1) / kRows : 1u; /* threads per column */
  const unsigned cols = kDeltaBlock / nch;         /* columns per group */
  const unsigned c = threadIdx.x % nch, jj = threadIdx.x / nch;
  const unsigned r0 = c * kRows, nr = p.dk - r0 < kRows ? p.dk - r0 : kRows;
  for (unsigned j0 = 0; j0 < p.dv; j0 += cols) {
    const unsigned j = j0 + jj;
    const bool active = jj < cols && j < p.dv;
    float s[kRows];
#pragma unroll
    for (unsigned i = 0; i < kRows; i++)
      s[i] = p.S && active && i < nr ? p.S[(size_t)(r0 + i) * p.dv + j] : 0.0f;
    for (size_t t = p.t0; t < p.t1; t++) {
      const float *row = p.qkv + t * p.C;
      const float *q = row + (size_t)p.kh * p.dk + r0, *k = row + (size_t)(p.nk + p.kh) * p.dk + r0;
      const float decay = expf(p.g[t * p.nv + p.h]), b = p.beta[t * p.nv + p.h];
      float kv = 0.0f;
#pragma unroll
      for (unsigned i = 0; i < kRows; i++) {
        if (i < nr) {
          s[i] *= decay;
          kv = fmaf(k[i], s[i], kv);
        }
      }
      part[threadIdx.x] = kv;
      __syncthreads();
      float kvt = 0.0f;
      if (active)
        for (unsigned cc = 0; cc < nch; cc++) kvt += part[jj * nch + cc];
      __syncthreads();
      const float v = active ? row[(size_t)2 * p.nk * p.dk + (size_t)p.h * p.dv + j] : 0.0f;
      const float d = b * (v - kvt);
      float ov = 0.0f;
#pragma unroll
      for (unsigned i = 0; i < kRows; i++) {
        if (i < nr) {
          s[i] = fmaf(k[i], d, s[i]);
          ov = fmaf(q[i], s[i], ov);
        }
      }
      part[threadIdx.x] = ov;
      __syncthreads();
      if (active && c == 0) {
        float ot = 0.0f;
        for (unsigned cc = 0; cc < nch; cc++) ot += part[jj * nch + cc];
        p.o[(t * p.nv + p.h) * p.dv + j] = f32_to_bf16(ot);
      }
      __syncthreads();
    }
    if (p.S && active) {
#pragma unroll
      for (unsigned i = 0; i < kRows; i++)
        if (i < nr) p.S[(size_t)(r0 + i) * p.dv + j] = s[i];
    }
  }
}

/* The dispatch depends on dk only, so a whole block takes the same path.  The paths are
 * not inlined: each gets its own register allocation (inlined together, the dk = 128
 * column and the other paths' values spilled). */
__device__ void delta_seq(const delta_head &p) {
  if (p.dk == 128)
    delta_seq_registers<128>(p);
  else if (p.dk == 64)
    delta_seq_registers<64>(p);
  else
    delta_seq_general(p);
}

__device__ delta_head make_head(bf16 *o, const float *qkv, const float *g, const float *beta,
                                float *state, int slot, size_t t0, size_t t1, unsigned h,
                                unsigned nk, unsigned nv, unsigned dk, unsigned dv) {
  delta_head p;
  p.o = o;
  p.qkv = qkv;
  p.g = g;
  p.beta = beta;
  p.S = slot < 0 ? nullptr : state + ((size_t)slot * nv + h) * dk * dv; /* slot -1: padding */
  p.t0 = t0;
  p.t1 = t1;
  p.h = h;
  p.kh = h / (nv / nk); /* grouped heads: value head h reads key head h / r */
  p.nk = nk;
  p.nv = nv;
  p.dk = dk;
  p.dv = dv;
  p.C = (size_t)2 * nk * dk + (size_t)nv * dv;
  return p;
}

/* Launch-time validation rejects these; a kernel reached anyway does nothing rather
 * than divide by zero or overrun its per-thread rows. */
__device__ __forceinline__ bool heads_ok(unsigned nk, unsigned nv, unsigned dk) {
  return nk != 0 && nv >= nk && nv % nk == 0 && dk <= kRows * kDeltaBlock;
}
}  // namespace

namespace {
/* Elements of a p row each thread loads before it stores any: a token's row is one
 * block's whole work, so without several loads in flight per thread the split waits on
 * memory latency rather than bandwidth. */
constexpr unsigned kSplitBatch = 4;
}  // namespace

MK_KERNEL(split_qkvzba35)(float *__restrict__ mixed, float *__restrict__ z,
                          float *__restrict__ b, float *__restrict__ a,
                          const float *__restrict__ p, unsigned t,
                          unsigned nk, unsigned nv, unsigned dk, unsigned dv) {
  if (blockIdx.x >= t) return;
  const size_t C = 2 * (size_t)nk * dk + (size_t)nv * dv, zw = (size_t)nv * dv;
  const size_t width = C + zw + 2 * (size_t)nv; /* [q | k | v | z | b | a] */
  const size_t tok = blockIdx.x;
  const float *row = p + tok * width;
  for (size_t i0 = threadIdx.x; i0 < width; i0 += kSplitBatch * blockDim.x) {
    float v[kSplitBatch];
#pragma unroll
    for (unsigned u = 0; u < kSplitBatch; u++) {
      const size_t i = i0 + (size_t)u * blockDim.x;
      v[u] = i < width ? row[i] : 0.0f;
    }
#pragma unroll
    for (unsigned u = 0; u < kSplitBatch; u++) {
      const size_t i = i0 + (size_t)u * blockDim.x;
      if (i >= width) break;
      if (i < C)
        mixed[tok * C + i] = v[u];
      else if (i < C + zw)
        z[tok * zw + (i - C)] = v[u];
      else if (i < C + zw + nv)
        b[tok * nv + (i - C - zw)] = v[u];
      else
        a[tok * nv + (i - C - zw - nv)] = v[u];
    }
  }
}
MK_CHECK(split_qkvzba35, gdn);

MK_KERNEL(l2norm_qk)(float *__restrict__ x, unsigned t, unsigned nk, unsigned dk, unsigned ld) {
  __shared__ float red[kL2Block];
  const unsigned heads = 2 * nk;
  if (heads == 0 || blockIdx.x >= (size_t)t * heads) return;
  const unsigned tok = blockIdx.x / heads, hh = blockIdx.x % heads; /* hh < nk: q head */
  float *v = x + (size_t)tok * ld + (size_t)hh * dk;                /* [dk] */
  /* the thread's first element stays in a register across the reduction (dk <= 128:
   * the only one), so the scaling pass does not reload it */
  const float v0 = threadIdx.x < dk ? v[threadIdx.x] : 0.0f;
  float ss = v0 * v0;
  for (unsigned i = threadIdx.x + kL2Block; i < dk; i += kL2Block) ss += v[i] * v[i];
  float scale = 1.0f / sqrtf(block_sum<kL2Block>(ss, red) + 1e-6f);
  if (hh < nk) scale *= 1.0f / sqrtf((float)dk);
  if (threadIdx.x < dk) v[threadIdx.x] = v0 * scale;
  for (unsigned i = threadIdx.x + kL2Block; i < dk; i += kL2Block) v[i] *= scale;
}
MK_CHECK(l2norm_qk, gdn);

namespace {
constexpr unsigned kL2RowsBlock = mk_block("l2norm_qk_rows");
constexpr unsigned kL2Group = 32; /* threads per head (kernels.def) */
static_assert(kL2RowsBlock % kL2Group == 0, "whole head groups per block");

/* Sum over an aligned group of 32 threads.  The xor offsets 16..1 stay inside the group,
 * so on a 64-lane wavefront each half reduces its own head. */
__device__ __forceinline__ float group32_sum(float v) {
#pragma unroll
  for (unsigned off = kL2Group / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off, kL2Group);
  return v;
}
}  // namespace

/* l2norm_qk with 32 threads a head instead of a 128-thread block: no block barrier, 8
 * heads a block, 4 floats a thread as one vector (dk = 128: one load and one store each). */
MK_KERNEL(l2norm_qk_rows)(float *__restrict__ x, unsigned t, unsigned nk, unsigned dk, unsigned ld) {
  const unsigned heads = 2 * nk;
  if (heads == 0) return; /* uniform over the grid */
  const unsigned lane = threadIdx.x % kL2Group;
  const size_t hidx = (size_t)blockIdx.x * (kL2RowsBlock / kL2Group) + threadIdx.x / kL2Group;
  /* A group past the last head still takes part in the shuffles; it only skips memory. */
  const bool live = hidx < (size_t)t * heads;
  const size_t tok = live ? hidx / heads : 0;
  const unsigned hh = live ? (unsigned)(hidx % heads) : 0; /* hh < nk: q head */
  float *v = x + tok * ld + (size_t)hh * dk;               /* [dk] */
  const bool vec = dk % 4 == 0 && ld % 4 == 0 && aligned16(x);
  float ss = 0.0f, scale;
  if (vec) {
    /* the first vector stays in registers across the reduction (dk <= 128: the only one) */
    const unsigned i0 = 4 * lane;
    const bool has0 = live && i0 < dk;
    float4 v0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (has0) v0 = *(const float4 *)(v + i0);
    ss = v0.x * v0.x + v0.y * v0.y + v0.z * v0.z + v0.w * v0.w;
    for (unsigned i = i0 + 4 * kL2Group; live && i < dk; i += 4 * kL2Group) {
      const float4 a = *(const float4 *)(v + i);
      ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
    }
    scale = 1.0f / sqrtf(group32_sum(ss) + 1e-6f);
    if (hh < nk) scale *= 1.0f / sqrtf((float)dk);
    if (has0) *(float4 *)(v + i0) = make_float4(v0.x * scale, v0.y * scale, v0.z * scale, v0.w * scale);
    for (unsigned i = i0 + 4 * kL2Group; live && i < dk; i += 4 * kL2Group) {
      const float4 a = *(const float4 *)(v + i);
      *(float4 *)(v + i) = make_float4(a.x * scale, a.y * scale, a.z * scale, a.w * scale);
    }
    return;
  }
  for (unsigned i = lane; live && i < dk; i += kL2Group) ss += v[i] * v[i];
  scale = 1.0f / sqrtf(group32_sum(ss) + 1e-6f);
  if (hh < nk) scale *= 1.0f / sqrtf((float)dk);
  for (unsigned i = lane; live && i < dk; i += kL2Group) v[i] *= scale;
}
MK_CHECK(l2norm_qk_rows, gdn);

/* The gates of one (token, value head): g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b). */
__device__ __forceinline__ void gate(float *g, float *beta, float a, float b, float a_log, bf16 dt_bias) {
  *g = -expf(a_log) * softplus_f(a + bf16_to_f32(dt_bias));
  *beta = sigmoid_f(b);
}

MK_KERNEL(gates)(float *__restrict__ g, float *__restrict__ beta, const float *__restrict__ a,
                 const float *__restrict__ b, const float *__restrict__ a_log,
                 const bf16 *__restrict__ dt_bias, unsigned n, unsigned nv) {
  if (nv == 0) return;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const unsigned h = (unsigned)(i % nv); /* i = (token, value head) */
    gate(&g[i], &beta[i], a[i], b[i], a_log[h], dt_bias[h]);
  }
}
MK_CHECK(gates, gdn);

MK_KERNEL(gates_ba)(float *__restrict__ g, float *__restrict__ beta, const float *__restrict__ ba,
                    const float *__restrict__ a_log, const bf16 *__restrict__ dt_bias, unsigned n,
                    unsigned nv) {
  if (nv == 0) return;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const size_t t = i / nv;
    const unsigned h = (unsigned)(i % nv); /* i = (token, value head) */
    const float *row = ba + t * 2 * nv;    /* [b | a] of token t */
    gate(&g[i], &beta[i], row[nv + h], row[h], a_log[h], dt_bias[h]);
  }
}
MK_CHECK(gates_ba, gdn);

MK_KERNEL(delta_rule_decode)(bf16 *o, const float *qkv, const float *g, const float *beta,
                             float *state, const int *slots, unsigned bsz, unsigned nk,
                             unsigned nv, unsigned dk, unsigned dv) {
  if (!heads_ok(nk, nv, dk) || blockIdx.x >= (size_t)bsz * nv) return;
  const unsigned bi = blockIdx.x / nv, h = blockIdx.x % nv;
  delta_seq(make_head(o, qkv, g, beta, state, slots[bi], bi, (size_t)bi + 1, h, nk, nv, dk, dv));
}
MK_CHECK(delta_rule_decode, gdn);

MK_KERNEL(delta_rule_prefill)(bf16 *o, const float *qkv, const float *g, const float *beta,
                              float *state, const int *cu_seqlens, const int *slots, unsigned s,
                              unsigned nk, unsigned nv, unsigned dk, unsigned dv) {
  if (!heads_ok(nk, nv, dk) || blockIdx.x >= (size_t)s * nv) return;
  const unsigned seq = blockIdx.x / nv, h = blockIdx.x % nv;
  const int t0 = cu_seqlens[seq], t1 = cu_seqlens[seq + 1];
  if (t0 < 0 || t1 <= t0) return; /* an empty sequence leaves its state as it was */
  delta_seq(make_head(o, qkv, g, beta, state, slots[seq], (size_t)t0, (size_t)t1, h, nk, nv, dk, dv));
}
MK_CHECK(delta_rule_prefill, gdn);
