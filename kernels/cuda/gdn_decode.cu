/* gdn_decode module: one decode token per slot from the input projection's output p to
 * the gated-norm output, in one kernel (kernels.def gdn_decode_fused35; for small batches
 * gdn_decode_cluster35, at the end of this file).
 *
 * One block per (token, key head): the r = nv/nk value heads of a key head share its q/k
 * conv channels, so one block owns every conv channel it reads and writes (no race on
 * the conv state).  The block first issues the loads of its first value head's state,
 * then runs the conv, the q/k l2norm and the gates while they are in flight.
 *
 * Decode streams the recurrent state: for a batch of 256 that is 8192 heads x 64 KiB
 * read and written, against 67 MB of weights.  On the dk = dv = 128 path each thread
 * holds a 16 x 4 tile of the head's state S [dk, dv] (rows warp*16.., columns 4*lane..),
 * loaded and stored as 16-byte vectors, a warp reading whole 512-byte rows; the column
 * sums k.S and q.S go through shared memory, and S is written back once.  Any other head
 * size takes a general path (one thread per column, the state read twice from memory).
 *
 * Per value head, as the chain computes it (gdn.cu, norm.cu):
 *   s' = S*exp(g);  d = beta*(v - k.s');  S = s' + k d^T;  o = q.s' + (q.k) d  (f32)
 *   y = bf16( bf16(bf16(o) * rsqrt(mean(bf16(o)^2) + eps)) * w * silu(z) ).
 *
 * Sums over 32 consecutive threads use xor shuffles of distance < 32, which stay inside
 * a 32-lane group on any warp or wavefront width of 32 or more. */
#include "common.cuh"

#if !defined(__HIPCC__) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
#include <cooperative_groups.h> /* gdn_decode_cluster35: clusters, distributed shared memory */
#endif

namespace {
constexpr unsigned kBlock = mk_block("gdn_decode_fused35");
static_assert(kBlock == 256 && mk_block("gdn_decode_fused35") == kBlock,
              "the thread mapping below assumes blocks of 256");
constexpr unsigned kGroups = kBlock / 32; /* 32-lane groups per block */
constexpr unsigned kMaxDk = 32u * 128u;   /* general path: q and k of a head in shared memory
                                             (the cuda backend rejects larger dk) */
constexpr unsigned FD = 128;              /* the fast path's dk = dv */
constexpr unsigned kTileRows = FD / kGroups; /* state rows per thread on the fast path */

__device__ __forceinline__ float shfl_xor(float v, unsigned m) {
#if defined(__HIPCC__)
  return __shfl_xor(v, (int)m);
#else
  return __shfl_xor_sync(0xffffffffu, v, (int)m);
#endif
}

/* Sum over the 32-lane group of this thread (every lane of it gets the total). */
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (unsigned m = 16; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}

/* Sum of v over the block; red holds kGroups floats.  Ends with a barrier, so red may be
 * reused right away. */
__device__ __forceinline__ float block_total(float v, float *red) {
  v = group_sum(v);
  if (threadIdx.x % 32u == 0) red[threadIdx.x / 32u] = v;
  __syncthreads();
  float t = 0.0f;
#pragma unroll
  for (unsigned g = 0; g < kGroups; g++) t += red[g];
  __syncthreads();
  return t;
}

/* Where the pieces of one token's row of p are: [q | k | v | z | b | a] (kernels.def
 * split_qkvzba35; the layer keeps in_proj in this order for both families). */
struct row_layout {
  size_t C;
  unsigned nk, nv, dk, dv, r; /* r = nv / nk value heads per key head */
  __device__ row_layout(unsigned nk_, unsigned nv_, unsigned dk_, unsigned dv_)
      : nk(nk_), nv(nv_), dk(dk_), dv(dv_), r(nv_ / nk_) {
    C = 2 * (size_t)nk * dk + (size_t)nv * dv;
  }
  __device__ size_t width() const { return C + (size_t)nv * dv + 2 * (size_t)nv; }
  __device__ size_t q(unsigned kh) const { return (size_t)kh * dk; }
  __device__ size_t k(unsigned kh) const { return (size_t)(nk + kh) * dk; }
  __device__ size_t v(unsigned h) const { return 2 * (size_t)nk * dk + (size_t)h * dv; }
  __device__ size_t z(unsigned h) const { return C + (size_t)h * dv; }
  __device__ size_t b(unsigned h) const { return C + (size_t)nv * dv + h; }
  __device__ size_t a(unsigned h) const { return b(h) + nv; }
};

/* conv1d_update of one channel: silu of the causal conv over (state, x), in the
 * reference's order; the state (K-1 values, oldest first; NULL for padding) shifts by x. */
__device__ __forceinline__ float conv_channel(float x, const bf16 *__restrict__ wc, float *st,
                                              unsigned kw) {
  if (kw == 4) {
    const float h0 = st ? st[0] : 0.0f, h1 = st ? st[1] : 0.0f, h2 = st ? st[2] : 0.0f;
    float acc = 0.0f;
    acc += bf16_to_f32(wc[0]) * h0;
    acc += bf16_to_f32(wc[1]) * h1;
    acc += bf16_to_f32(wc[2]) * h2;
    acc += bf16_to_f32(wc[3]) * x;
    if (st) {
      st[0] = h1;
      st[1] = h2;
      st[2] = x;
    }
    return silu_f(acc);
  }
  const unsigned hist = kw - 1;
  float acc = 0.0f;
  for (unsigned j = 0; j < hist; j++) acc += bf16_to_f32(wc[j]) * (st ? st[j] : 0.0f);
  acc += bf16_to_f32(wc[hist]) * x;
  if (st) {
    for (unsigned j = 0; j + 1 < hist; j++) st[j] = st[j + 1];
    if (hist) st[hist - 1] = x;
  }
  return silu_f(acc);
}

/* What a block works on. */
struct fused_job {
  bf16 *y;               /* this token's y row [nv*dv] */
  const float *row;      /* this token's p row */
  const bf16 *cw;        /* conv weights [C, K] */
  float *cs;             /* this slot's conv state [C, K-1], or NULL */
  const float *a_log;
  const bf16 *dt_bias, *nw;
  float *S;              /* this slot's recurrent state [nv, dk, dv], or NULL */
  unsigned kh, kw;
  float eps;
};

/* The job of token tok (its slot: -1 is padding, zero state, nothing stored) and key head kh. */
__device__ __forceinline__ fused_job job_of(bf16 *y, const float *p, const bf16 *cw, float *cs,
                                            const float *a_log, const bf16 *dt_bias, const bf16 *nw,
                                            float *state, int slot, unsigned tok, unsigned kh,
                                            const row_layout &L, unsigned kw, float eps) {
  fused_job j;
  j.y = y + (size_t)tok * L.nv * L.dv;
  j.row = p + (size_t)tok * L.width();
  j.cw = cw;
  j.cs = slot < 0 ? nullptr : cs + (size_t)slot * L.C * (kw - 1);
  j.a_log = a_log;
  j.dt_bias = dt_bias;
  j.nw = nw;
  j.S = slot < 0 ? nullptr : state + (size_t)slot * L.nv * L.dk * L.dv;
  j.kh = kh;
  j.kw = kw;
  j.eps = eps;
  return j;
}

__device__ __forceinline__ float *conv_state_of(const fused_job &j, size_t ch) {
  return j.cs ? j.cs + ch * (j.kw - 1) : nullptr;
}

/* g and beta of value head h (gdn.gates). */
__device__ __forceinline__ void head_gates(const fused_job &j, const row_layout &L,
                                           unsigned h, float *g, float *beta) {
  *g = -expf(j.a_log[h]) * softplus_f(j.row[L.a(h)] + bf16_to_f32(j.dt_bias[h]));
  *beta = sigmoid_f(j.row[L.b(h)]);
}

/* ---- dk = dv = 128 ------------------------------------------------------------------ */

struct fast_smem {
  float qk[2 * FD];          /* q (normalised, * dk^-1/2) then k (normalised) */
  float kv[kGroups][FD];     /* per-group partial column sums of k.s' */
  float qv[kGroups][FD];     /* and of q.s' */
  float d[FD];
  float red[4][kGroups];
};

__device__ __forceinline__ float4 f4_scale(float4 a, float s) {
  return make_float4(a.x * s, a.y * s, a.z * s, a.w * s);
}
__device__ __forceinline__ float4 f4_fma(float s, float4 a, float4 c) {
  return make_float4(fmaf(s, a.x, c.x), fmaf(s, a.y, c.y), fmaf(s, a.z, c.z), fmaf(s, a.w, c.w));
}

/* This thread's tile of head state Sh [128,128]: rows r0..r0+15, columns c0..c0+3. */
__device__ __forceinline__ void tile_load(float4 (&t)[kTileRows], const float *Sh, unsigned r0,
                                          unsigned c0) {
#pragma unroll
  for (unsigned i = 0; i < kTileRows; i++)
    t[i] = Sh ? *reinterpret_cast<const float4 *>(Sh + (size_t)(r0 + i) * FD + c0)
              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

/* Column c of a head once the groups' partial sums of k.s' (kvp) and q.s' (qvp) are in:
 * d = beta (v - k.s') goes to d_s[c]; returns o = q.s' + (q.k) d, rounded to bf16 as the
 * chain stores it. */
template <unsigned W>
__device__ __forceinline__ float column_update(const float (&kvp)[kGroups][W], const float (&qvp)[kGroups][W],
                                               unsigned c, float beta, float v, float qk, float *d_s) {
  float kvs = 0.0f, qvs = 0.0f;
#pragma unroll
  for (unsigned gi = 0; gi < kGroups; gi++) kvs += kvp[gi][c], qvs += qvp[gi][c];
  const float d = beta * (v - kvs);
  d_s[c] = d;
  return round_bf16(fmaf(qk, d, qvs));
}

/* The l2norm of a key head's conv'd q (qk[0..127]) and k (qk[128..255]), one value a
 * thread: |q|^2, |k|^2 and q.k of the raw vectors summed over the block, then q scaled by
 * dk^-1/2 / |q| and k by 1 / |k| in place.  Returns q.k of the normalised vectors. */
__device__ __forceinline__ float l2norm_qk_fast(float *qk_s, float (*red)[kGroups]) {
  const unsigned tid = threadIdx.x, grp = tid / 32u, lane = tid % 32u;
  const float q = tid < FD ? qk_s[tid] : 0.0f, k = tid < FD ? qk_s[FD + tid] : 0.0f;
  float a = group_sum(q * q), b = group_sum(k * k), c = group_sum(q * k);
  if (lane == 0) red[0][grp] = a, red[1][grp] = b, red[2][grp] = c;
  __syncthreads();
  a = b = c = 0.0f;
#pragma unroll
  for (unsigned g = 0; g < kGroups; g++) a += red[0][g], b += red[1][g], c += red[2][g];
  const float sq = 1.0f / sqrtf(a + 1e-6f) * (1.0f / sqrtf((float)FD)), sk = 1.0f / sqrtf(b + 1e-6f);
  const float qk = c * sq * sk;
  qk_s[tid] *= tid < FD ? sq : sk;
  __syncthreads();
  return qk;
}

__device__ __noinline__ void fused_fast(const fused_job &j, const row_layout &L, fast_smem &sm) {
  const unsigned tid = threadIdx.x, grp = tid / 32u, lane = tid % 32u;
  const unsigned r0 = grp * kTileRows, c0 = lane * 4u;
  const unsigned h0 = j.kh * L.r;
  const size_t head = (size_t)FD * FD;

  float4 S[kTileRows];
  tile_load(S, j.S ? j.S + h0 * head : nullptr, r0, c0); /* in flight during the prelude */

  /* conv of the key head's q (threads 0..127) and k (128..255) channels */
  {
    const unsigned i = tid % FD;
    const bool is_k = tid >= FD;
    const size_t ch = (size_t)(is_k ? L.nk + j.kh : j.kh) * FD + i;
    const float x = j.row[(is_k ? L.k(j.kh) : L.q(j.kh)) + i];
    sm.qk[tid] = conv_channel(x, j.cw + ch * j.kw, conv_state_of(j, ch), j.kw);
  }
  __syncthreads();
  const float qk = l2norm_qk_fast(sm.qk, sm.red); /* q.k of the normalised vectors */

  for (unsigned hh = 0; hh < L.r; hh++) {
    const unsigned h = h0 + hh;
    float *Sh = j.S ? j.S + (size_t)h * head : nullptr;
    if (hh > 0) tile_load(S, Sh, r0, c0);
    float g, beta;
    head_gates(j, L, h, &g, &beta);
    const float decay = expf(g);
    /* column j = tid of this head: its v (conv) and z */
    float v = 0.0f, z = 0.0f;
    if (tid < FD) {
      const size_t ch = 2 * (size_t)L.nk * FD + (size_t)h * FD + tid;
      v = conv_channel(j.row[L.v(h) + tid], j.cw + ch * j.kw, conv_state_of(j, ch), j.kw);
      z = j.row[L.z(h) + tid];
    }
    float4 kv = make_float4(0.0f, 0.0f, 0.0f, 0.0f), qv = kv;
#pragma unroll
    for (unsigned i = 0; i < kTileRows; i++) {
      S[i] = f4_scale(S[i], decay);
      kv = f4_fma(sm.qk[FD + r0 + i], S[i], kv);
      qv = f4_fma(sm.qk[r0 + i], S[i], qv);
    }
    *reinterpret_cast<float4 *>(&sm.kv[grp][c0]) = kv;
    *reinterpret_cast<float4 *>(&sm.qv[grp][c0]) = qv;
    __syncthreads();
    const float ob = tid < FD ? column_update(sm.kv, sm.qv, tid, beta, v, qk, sm.d) : 0.0f;
    const float ss = group_sum(ob * ob);
    if (lane == 0) sm.red[3][grp] = ss;
    __syncthreads();
    const float4 d4 = *reinterpret_cast<const float4 *>(&sm.d[c0]);
#pragma unroll
    for (unsigned i = 0; i < kTileRows; i++) {
      const float k = sm.qk[FD + r0 + i];
      S[i] = f4_fma(k, d4, S[i]);
      if (Sh) *reinterpret_cast<float4 *>(Sh + (size_t)(r0 + i) * FD + c0) = S[i];
    }
    if (tid < FD) {
      float tot = 0.0f;
#pragma unroll
      for (unsigned gi = 0; gi < FD / 32u; gi++) tot += sm.red[3][gi];
      const float inv = 1.0f / sqrtf(tot / (float)FD + j.eps);
      const float normed = round_bf16(ob * inv);
      j.y[(size_t)h * FD + tid] = f32_to_bf16(normed * bf16_to_f32(j.nw[tid]) * silu_f(z));
    }
    __syncthreads(); /* the next head rewrites kv, qv, d and red */
  }
}

/* ---- any dk <= kMaxDk, any dv ----------------------------------------------------- */

struct general_smem {
  float qk[2 * kMaxDk]; /* q then k, normalised */
  float red[kGroups];
};

__device__ __noinline__ void fused_general(const fused_job &j, const row_layout &L,
                                           general_smem &sm) {
  float *qk_s = sm.qk, *red = sm.red;
  const unsigned dk = L.dk, dv = L.dv;
  float a = 0.0f, b = 0.0f, c = 0.0f;
  for (unsigned i = threadIdx.x; i < 2 * dk; i += kBlock) {
    const bool is_k = i >= dk;
    const unsigned e = is_k ? i - dk : i;
    const size_t ch = (size_t)(is_k ? L.nk + j.kh : j.kh) * dk + e;
    qk_s[i] = conv_channel(j.row[(is_k ? L.k(j.kh) : L.q(j.kh)) + e], j.cw + ch * j.kw,
                           conv_state_of(j, ch), j.kw);
  }
  __syncthreads();
  for (unsigned i = threadIdx.x; i < dk; i += kBlock) {
    const float q = qk_s[i], k = qk_s[dk + i];
    a += q * q, b += k * k, c += q * k;
  }
  a = block_total(a, red);
  b = block_total(b, red);
  c = block_total(c, red);
  const float sq = 1.0f / sqrtf(a + 1e-6f) * (1.0f / sqrtf((float)dk)), sk = 1.0f / sqrtf(b + 1e-6f);
  const float qk = c * sq * sk;
  for (unsigned i = threadIdx.x; i < 2 * dk; i += kBlock) qk_s[i] *= i < dk ? sq : sk;
  __syncthreads();
  const float *q = qk_s, *k = qk_s + dk;

  for (unsigned hh = 0; hh < L.r; hh++) {
    const unsigned h = j.kh * L.r + hh;
    float *Sh = j.S ? j.S + (size_t)h * dk * dv : nullptr;
    float g, beta;
    head_gates(j, L, h, &g, &beta);
    const float decay = expf(g);
    float ss = 0.0f;
    for (unsigned col = threadIdx.x; col < dv; col += kBlock) {
      const size_t ch = 2 * (size_t)L.nk * dk + (size_t)h * dv + col;
      const float v = conv_channel(j.row[L.v(h) + col], j.cw + ch * j.kw, conv_state_of(j, ch), j.kw);
      float kv = 0.0f, qv = 0.0f;
      for (unsigned i = 0; i < dk; i++) {
        const float s = (Sh ? Sh[(size_t)i * dv + col] : 0.0f) * decay;
        kv = fmaf(k[i], s, kv);
        qv = fmaf(q[i], s, qv);
      }
      const float d = beta * (v - kv);
      if (Sh)
        for (unsigned i = 0; i < dk; i++) Sh[(size_t)i * dv + col] = fmaf(k[i], d, Sh[(size_t)i * dv + col] * decay);
      const float ob = round_bf16(fmaf(qk, d, qv));
      j.y[(size_t)h * dv + col] = f32_to_bf16(ob); /* o, until the norm below */
      ss += ob * ob;
    }
    const float inv = 1.0f / sqrtf(block_total(ss, red) / (float)dv + j.eps);
    for (unsigned col = threadIdx.x; col < dv; col += kBlock) { /* the columns this thread wrote */
      const float normed = round_bf16(bf16_to_f32(j.y[(size_t)h * dv + col]) * inv);
      j.y[(size_t)h * dv + col] =
          f32_to_bf16(normed * bf16_to_f32(j.nw[col]) * silu_f(j.row[L.z(h) + col]));
    }
  }
}

__device__ __forceinline__ void fused_decode(bf16 *y, const float *p, const bf16 *cw, float *cs,
                                             const float *a_log, const bf16 *dt_bias,
                                             const bf16 *nw, float *state, const int *slots,
                                             unsigned bsz, unsigned nk, unsigned nv, unsigned dk,
                                             unsigned dv, unsigned kw, float eps) {
  /* launch-time validation rejects these; reached anyway, do nothing rather than fault */
  if (nk == 0 || nv % nk != 0 || nv == 0 || kw == 0 || dk > kMaxDk) return;
  if (blockIdx.x >= (size_t)bsz * nk) return;
  const row_layout L(nk, nv, dk, dv);
  const unsigned tok = blockIdx.x / nk;
  const fused_job j = job_of(y, p, cw, cs, a_log, dt_bias, nw, state, slots[tok], tok, blockIdx.x % nk, L,
                             kw, eps);
  /* one shared-memory block for whichever path runs */
  __shared__ __align__(16) unsigned char smem[sizeof(fast_smem) > sizeof(general_smem)
                                                  ? sizeof(fast_smem)
                                                  : sizeof(general_smem)];
  if (dk == FD && dv == FD && aligned16(state))
    fused_fast(j, L, *reinterpret_cast<fast_smem *>(smem));
  else
    fused_general(j, L, *reinterpret_cast<general_smem *>(smem));
}
}  // namespace

/* At most 128 registers a thread, so that two blocks share a multiprocessor: one streams
 * its state while the other computes. */
extern "C" __global__ void __launch_bounds__(mk_block("gdn_decode_fused35"), 2)
gdn_decode_fused35(bf16 *y, const float *p, const bf16 *conv_w, float *conv_state,
                   const float *a_log, const bf16 *dt_bias, const bf16 *norm_w, float *state,
                   const int *slots, unsigned bsz, unsigned nk, unsigned nv, unsigned dk,
                   unsigned dv, unsigned kw, float eps) {
  mk_allow_next();
  fused_decode(y, p, conv_w, conv_state, a_log, dt_bias, norm_w, state, slots, bsz, nk, nv, dk, dv,
               kw, eps);
}
MK_CHECK(gdn_decode_fused35, gdn_decode);

/* ---- small batches: gdn_decode_cluster35 --------------------------------------------- *
 * At batch 1 the fused kernel runs 16 blocks, each walking two 64 KiB heads behind a
 * chain of dependent loads, on a GPU of 132 SMs.  Here a block takes one value head's 32
 * columns (a [128, 32] slice of S, 16 KiB) and the four blocks of a value head sit in
 * one thread-block cluster with the other value head of their key head (r <= 2, so a
 * cluster of 8 holds every block that reads a key head's q/k conv state).  Each block
 * recomputes the key head's q/k conv and l2norm without storing the conv state; after a
 * cluster barrier one block of the key head stores it, and the four blocks of a value
 * head add their parts of the norm's sum of squares through distributed shared memory.
 *
 * Same arithmetic as fused_fast, column by column: a column's k.s' and q.s' are summed
 * over the same 16-row groups in the same order, a 32-column slice is one of the fused
 * kernel's 32-lane norm groups, and the four group sums are added in the same order, so
 * y and both states equal the fused kernel's bit for bit.  Only in the sm_90 images
 * (clusters; and in host passes, which only declare it); elsewhere the row is absent and
 * the fused kernel runs. */
#if !defined(__HIPCC__) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
namespace {
constexpr unsigned kSlices = 4;               /* blocks per value head */
constexpr unsigned kSliceCols = FD / kSlices; /* 32 columns: one norm group of fused_fast */
constexpr unsigned kCluster = 8;              /* two value heads' blocks */
static_assert(kSliceCols == 32 && kGroups * kTileRows == FD, "a lane per column, 16 rows a group");

/* The cluster barrier in two halves: the arrival releases what this thread wrote (and orders
 * what it read) before the other blocks' waits return. */
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* The same conv without the state update, for a state that several blocks read: the
 * arithmetic of conv_channel exactly (the cluster kernel's results equal the fused
 * kernel's bit for bit); conv_shift then updates the state. */
__device__ __forceinline__ float conv_value(float x, const bf16 *__restrict__ wc, const float *st,
                                            unsigned kw) {
  if (kw == 4) {
    float acc = 0.0f;
    acc += bf16_to_f32(wc[0]) * (st ? st[0] : 0.0f);
    acc += bf16_to_f32(wc[1]) * (st ? st[1] : 0.0f);
    acc += bf16_to_f32(wc[2]) * (st ? st[2] : 0.0f);
    acc += bf16_to_f32(wc[3]) * x;
    return silu_f(acc);
  }
  const unsigned hist = kw - 1;
  float acc = 0.0f;
  for (unsigned j = 0; j < hist; j++) acc += bf16_to_f32(wc[j]) * (st ? st[j] : 0.0f);
  acc += bf16_to_f32(wc[hist]) * x;
  return silu_f(acc);
}
__device__ __forceinline__ void conv_shift(float *st, float x, unsigned kw) {
  const unsigned hist = kw - 1;
  for (unsigned j = 0; j + 1 < hist; j++) st[j] = st[j + 1];
  if (hist) st[hist - 1] = x;
}

/* Value column col of head h: its v (conv of the head's own channel, whose state this block
 * stores) and its z. */
__device__ __forceinline__ void value_column(const fused_job &j, const row_layout &L, unsigned h, unsigned col,
                                             float *v, float *z) {
  const size_t ch = 2 * (size_t)L.nk * FD + (size_t)h * FD + col;
  *v = conv_channel(j.row[L.v(h) + col], j.cw + ch * j.kw, conv_state_of(j, ch), j.kw);
  *z = j.row[L.z(h) + col];
}

/* The key head's q (threads 0..127) and k (128..255) conv'd into qk[threadIdx.x] from the old
 * conv state, which is not stored: several blocks read it.  *x and the returned state (NULL
 * for padding) are what conv_shift needs once every reader is done. */
__device__ __forceinline__ float *qk_conv_kept(const fused_job &j, const row_layout &L, float *qk, float *x) {
  const unsigned i = threadIdx.x % FD;
  const bool is_k = threadIdx.x >= FD;
  const size_t ch = (size_t)(is_k ? L.nk + j.kh : j.kh) * FD + i;
  *x = j.row[(is_k ? L.k(j.kh) : L.q(j.kh)) + i];
  float *st = conv_state_of(j, ch);
  qk[threadIdx.x] = conv_value(*x, j.cw + ch * j.kw, st, j.kw);
  return st;
}

struct slice_smem {
  float qk[2 * FD];
  float red[3][kGroups];
  float kv[kGroups][kSliceCols]; /* per-group partial column sums of k.s' */
  float qv[kGroups][kSliceCols]; /* and of q.s' */
  float d[kSliceCols];
  float ss; /* this block's part of the norm's sum of squares */
};

__device__ __forceinline__ void slice_decode(bf16 *y, const float *p, const bf16 *cw, float *cs,
                                             const float *a_log, const bf16 *dt_bias,
                                             const bf16 *nw, float *state, const int *slots,
                                             unsigned bsz, unsigned nk, unsigned nv, unsigned dk,
                                             unsigned dv, unsigned kw, float eps, slice_smem &sm) {
  namespace cg = cooperative_groups;
  cg::cluster_group cl = cg::this_cluster();
  const unsigned tid = threadIdx.x, grp = tid / 32u, lane = tid % 32u;
  const unsigned unit = blockIdx.x / kSlices, slice = blockIdx.x % kSlices;
  /* launch-time validation rejects other shapes; every block still meets both barriers */
  const bool live = dk == FD && dv == FD && nk != 0 && nv % nk == 0 && nv / nk <= 2 && kw != 0 &&
                    unit < (size_t)bsz * nv;
  const unsigned col = slice * kSliceCols + lane, r0 = grp * kTileRows;
  float ob = 0.0f, z = 0.0f, x_qk = 0.0f;
  float *st_qk = nullptr;
  bf16 *yh = nullptr;
  bool shift_qk = false;
  if (live) {
    const row_layout L(nk, nv, FD, FD);
    const unsigned tok = unit / nv, h = unit % nv;
    const fused_job j = job_of(y, p, cw, cs, a_log, dt_bias, nw, state, slots[tok], tok, h / L.r, L, kw, eps);
    float *Sh = j.S ? j.S + (size_t)h * FD * FD : nullptr;

    float S[kTileRows]; /* rows r0.., column col: in flight during the prelude */
#pragma unroll
    for (unsigned i = 0; i < kTileRows; i++) S[i] = Sh ? Sh[(size_t)(r0 + i) * FD + col] : 0.0f;

    /* the head's gates, and column col's v (conv, this block's own channel) and z: they
     * need nothing of the q/k prelude, so their loads go out with the state's */
    float g, beta;
    head_gates(j, L, h, &g, &beta);
    const float decay = expf(g);
    float v = 0.0f;
    if (tid < kSliceCols) value_column(j, L, h, col, &v, &z);
    st_qk = qk_conv_kept(j, L, sm.qk, &x_qk);
    shift_qk = slice == 0 && h % L.r == 0 && st_qk; /* one block per key head stores it */
    __syncthreads();
    const float qk = l2norm_qk_fast(sm.qk, sm.red); /* as fused_fast */

    float kv = 0.0f, qv = 0.0f;
#pragma unroll
    for (unsigned i = 0; i < kTileRows; i++) {
      S[i] = S[i] * decay;
      kv = fmaf(sm.qk[FD + r0 + i], S[i], kv);
      qv = fmaf(sm.qk[r0 + i], S[i], qv);
    }
    sm.kv[grp][lane] = kv;
    sm.qv[grp][lane] = qv;
    __syncthreads();
    if (tid < kSliceCols) ob = column_update(sm.kv, sm.qv, tid, beta, v, qk, sm.d);
    const float ss = group_sum(ob * ob);
    if (tid == 0) sm.ss = ss;
    __syncthreads();
    /* This block has read the q/k conv state and left its sum of squares.  Arriving before the
     * state's stores, not after them: a release behind the stores waits for them to land. */
    cluster_arrive_release();
    const float d = sm.d[lane];
#pragma unroll
    for (unsigned i = 0; i < kTileRows; i++) {
      S[i] = fmaf(sm.qk[FD + r0 + i], d, S[i]);
      if (Sh) Sh[(size_t)(r0 + i) * FD + col] = S[i];
    }
    yh = j.y + (size_t)h * FD;
  } else {
    cluster_arrive_release();
  }
  cluster_wait_acquire(); /* every block has read the q/k conv state and left its sum of squares */
  if (live) {
    if (tid < kSliceCols) {
      const unsigned first = cl.block_rank() - slice; /* the value head's four blocks */
      float tot = 0.0f;
#pragma unroll
      for (unsigned s = 0; s < kSlices; s++) tot += *cl.map_shared_rank(&sm.ss, first + s);
      const float inv = 1.0f / sqrtf(tot / (float)FD + eps);
      const float normed = round_bf16(ob * inv);
      yh[col] = f32_to_bf16(normed * bf16_to_f32(nw[col]) * silu_f(z));
    }
    if (shift_qk) conv_shift(st_qk, x_qk, kw);
  }
  cl.sync(); /* keeps each block's sum alive until the others have read it */
}
}  // namespace

extern "C" __global__ void __launch_bounds__(mk_block("gdn_decode_cluster35"))
__cluster_dims__(kCluster, 1, 1)
gdn_decode_cluster35(bf16 *y, const float *p, const bf16 *conv_w, float *conv_state,
                     const float *a_log, const bf16 *dt_bias, const bf16 *norm_w, float *state,
                     const int *slots, unsigned bsz, unsigned nk, unsigned nv, unsigned dk,
                     unsigned dv, unsigned kw, float eps) {
  __shared__ slice_smem sm;
  /* early start (kernels.def): resident before the input projection ends, nothing read
   * before the wait; the out_proj gemv may start (and stream its weights into L2) only
   * once this kernel runs, so that its prefetch overlaps this kernel, not the projection */
  mk_wait_prior();
  mk_allow_next();
  slice_decode(y, p, conv_w, conv_state, a_log, dt_bias, norm_w, state, slots, bsz, nk, nv, dk,
               dv, kw, eps, sm);
}
MK_CHECK(gdn_decode_cluster35, gdn_decode);
static_assert(mk_block("gdn_decode_cluster35") == kBlock, "the slice mapping assumes blocks of 256");
#endif


/* ---- larger batches: gdn_decode_pair35 (sm_90a) ---------------------------------------- *
 * The fused kernel's block walks its key head's value heads one after the other, each head's
 * 64 KiB of state in registers: the second head is requested only after the first is written
 * back, and with two blocks an SM (128 registers) the memory idles while both compute.  At
 * batch 256 it streams the 1.07 GB of state at 3.1 TB/s, where a load-all / store-all kernel
 * with one block a head reaches 3.9 (docs/perf-decode.md section 13).  Here a block takes one
 * value head, its state comes in by one bulk copy into shared memory (no registers held while
 * it lands, three blocks an SM) and goes back by one bulk store from there (docs/perf-decode.md
 * section 16: 354 -> 321 us alone at batch 256).  The two value heads of a key head form a
 * cluster of 2: each block computes the key head's q/k conv from the old conv state without
 * storing it, arrives on the cluster barrier once its column sums are done (it read that
 * state long before), and after its own work the block of the first value head waits on the
 * barrier and shifts the q/k conv state; each block shifts its own v channels last.  Same
 * arithmetic in the same order as fused_fast for each head (s' = S e^g is recomputed from the
 * copy for the update: the same bits), so y and both states equal the fused kernel's bit for
 * bit.  gdn_decode_pair35_r4 is the same block in clusters of 4: a key head's four value heads
 * (Qwen3.5-397B-A17B's and -122B-A10B's heads), whose fused kernel walks four heads a block. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "sm90a.cuh"
namespace {
constexpr unsigned kHeadBytes = FD * FD * sizeof(float);

/* One block: the head of unit blockIdx.x (token * nv + value head), its state copied into Ss.
 * R blocks a cluster: R = 2 takes r = nv/nk <= 2, R = 4 only r = 4 (a cluster is then one key
 * head's value heads; launch-time validation rejects other shapes). */
template <unsigned R>
__device__ __forceinline__ void pair_decode(bf16 *y, const float *p, const bf16 *cw, float *cs,
                                            const float *a_log, const bf16 *dt_bias, const bf16 *nw,
                                            float *state, const int *slots, unsigned bsz, unsigned nk,
                                            unsigned nv, unsigned dk, unsigned dv, unsigned kw, float eps,
                                            fast_smem &sm, float *Ss, uint64_t *bar) {
  const unsigned tid = threadIdx.x, grp = tid / 32u, lane = tid % 32u;
  const unsigned r0 = grp * kTileRows, c0 = lane * 4u;
  const size_t unit = blockIdx.x;
  /* launch-time validation rejects other shapes; every block still meets the barrier */
  const bool live = dk == FD && dv == FD && nk != 0 && nv % nk == 0 && (R == 4 ? nv / nk == 4 : nv / nk <= 2) && kw != 0 &&
                    unit < (size_t)bsz * nv && aligned16(state);
  float x_qk = 0.0f, x_v = 0.0f;
  float *st_qk = nullptr, *st_v = nullptr;
  bool shift_qk = false;
  if (live) {
    const row_layout L(nk, nv, FD, FD);
    const unsigned tok = (unsigned)(unit / nv), h = (unsigned)(unit % nv);
    const fused_job j = job_of(y, p, cw, cs, a_log, dt_bias, nw, state, slots[tok], tok, h / L.r, L, kw, eps);
    float *Sh = j.S ? j.S + (size_t)h * FD * FD : nullptr;
    if (tid == 0) {
      sm90::mbar_init(bar);
      if (Sh) sm90::bulk_copy(Ss, Sh, kHeadBytes, bar); /* lands during the prelude */
    }
    float g, beta;
    head_gates(j, L, h, &g, &beta);
    const float decay = expf(g);
    float v = 0.0f, z = 0.0f;
    if (tid < FD) { /* column tid's v (conv of this block's own channel, shifted at the end) and z */
      const size_t ch = 2 * (size_t)L.nk * FD + (size_t)h * FD + tid;
      x_v = j.row[L.v(h) + tid];
      st_v = conv_state_of(j, ch);
      v = conv_value(x_v, j.cw + ch * j.kw, st_v, j.kw);
      z = j.row[L.z(h) + tid];
    }
    st_qk = qk_conv_kept(j, L, sm.qk, &x_qk);
    shift_qk = h % L.r == 0 && st_qk; /* the key head's first value head stores it */
    __syncthreads(); /* also: the barrier is initialised before anyone waits on it */
    const float qk = l2norm_qk_fast(sm.qk, sm.red);
    if (Sh) sm90::mbar_wait(bar, 0);
    float4 kv = make_float4(0.0f, 0.0f, 0.0f, 0.0f), qv = kv;
#pragma unroll
    for (unsigned i = 0; i < kTileRows; i++) {
      const float4 s4 = Sh ? f4_scale(*reinterpret_cast<const float4 *>(Ss + (r0 + i) * FD + c0), decay) : kv;
      kv = f4_fma(sm.qk[FD + r0 + i], s4, kv);
      qv = f4_fma(sm.qk[r0 + i], s4, qv);
    }
    *reinterpret_cast<float4 *>(&sm.kv[grp][c0]) = kv;
    *reinterpret_cast<float4 *>(&sm.qv[grp][c0]) = qv;
    __syncthreads();
    const float ob = tid < FD ? column_update(sm.kv, sm.qv, tid, beta, v, qk, sm.d) : 0.0f;
    const float ss = group_sum(ob * ob);
    if (lane == 0) sm.red[3][grp] = ss;
    __syncthreads();
    /* This block has long read the q/k conv state.  It arrives here, not right after those
     * reads: a release there (with the prelude's loads still in flight) lengthened every
     * block's prelude, and a block holds its 64 KiB of shared memory from its first
     * instruction to its last: 318 -> 299 us alone at batch 256 (docs/perf-decode.md
     * section 23). */
    cluster_arrive_release();
    if (Sh) { /* S = s' + k d^T, in place in Ss, then one bulk store of the head */
      const float4 d4 = *reinterpret_cast<const float4 *>(&sm.d[c0]);
#pragma unroll
      for (unsigned i = 0; i < kTileRows; i++) {
        float4 *t = reinterpret_cast<float4 *>(Ss + (r0 + i) * FD + c0);
        *t = f4_fma(sm.qk[FD + r0 + i], d4, f4_scale(*t, decay));
      }
      sm90::fence_proxy_async(); /* the engine reads what the threads wrote */
      __syncthreads();
      if (tid == 0) {
        sm90::bulk_store(Sh, Ss, kHeadBytes);
        sm90::bulk_commit();
      }
    }
    if (tid < FD) {
      float tot = 0.0f;
#pragma unroll
      for (unsigned gi = 0; gi < FD / 32u; gi++) tot += sm.red[3][gi];
      const float inv = 1.0f / sqrtf(tot / (float)FD + eps);
      const float normed = round_bf16(ob * inv);
      j.y[(size_t)h * FD + tid] = f32_to_bf16(normed * bf16_to_f32(j.nw[tid]) * silu_f(z));
    }
  } else {
    cluster_arrive_release();
  }
  if (st_v) conv_shift(st_v, x_v, kw);
  cluster_wait_acquire(); /* every block of the key head has read the q/k conv state */
  if (shift_qk) conv_shift(st_qk, x_qk, kw);
  if (tid == 0) sm90::bulk_wait_read(); /* Ss stays until the engine has read it */
}
}  // namespace

/* The kernels, one a cluster size R: three blocks an SM, 3 x (64 KiB + the static 10 KiB) of shared
 * memory, <= 85 registers. */
#define PAIR_KERNEL(name, R)                                                                                  \
  static_assert(mk_shared(#name) == kHeadBytes, "kernels.def METRALE_KERNEL_SHARED row: one head");          \
  extern "C" __global__ void __launch_bounds__(mk_block(#name), 3) __cluster_dims__(R, 1, 1)                 \
  name(bf16 *y, const float *p, const bf16 *conv_w, float *conv_state, const float *a_log, const bf16 *dt_bias, \
       const bf16 *norm_w, float *state, const int *slots, unsigned bsz, unsigned nk, unsigned nv, unsigned dk,   \
       unsigned dv, unsigned kw, float eps) {                                                                 \
    extern __shared__ __align__(128) unsigned char smem_pair[];                                               \
    __shared__ __align__(16) fast_smem sm;                                                                    \
    __shared__ uint64_t bar;                                                                                  \
    mk_allow_next();                                                                                          \
    pair_decode<R>(y, p, conv_w, conv_state, a_log, dt_bias, norm_w, state, slots, bsz, nk, nv, dk, dv, kw, eps, \
                   sm, reinterpret_cast<float *>(smem_pair), &bar);                                           \
  }                                                                                                           \
  MK_CHECK(name, gdn_decode);                                                                                 \
  static_assert(mk_block(#name) == kBlock, "fused_fast's tiles assume blocks of 256")

PAIR_KERNEL(gdn_decode_pair35, 2);    /* r <= 2: a cluster is one or two key heads */
PAIR_KERNEL(gdn_decode_pair35_r4, 4); /* r = 4: a cluster is a key head */
#endif /* __CUDA_ARCH_FEAT_SM90_ALL */
