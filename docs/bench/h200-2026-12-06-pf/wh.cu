// Harness (2026-12-06, forty-eighth session; not part of the build): the chunk step of a core
// that keeps a whole head (128 value columns) a block, as docs/perf-prefill.md "Next
// (2026-12-06)" counts it, timed on its own.  Synthetic: every operand plane sits in shared
// memory from the start (no loads, no record, values meaningless), so what is timed is the
// chain of one chunk and its synchronisation:
//   warpgroups 0 and 3 (the state, rows 0..63 and 64..127 of dk): S = e^(G_L) S + Kd^T D (k over
//                            64 tokens), S into its fp16 plane for the next chunk;
//   warpgroup 1 (the values): P = K S (k over dk), R = V - e^G P, R into its plane,
//                            D = (T diag(beta)) R (k over the tokens), D into its plane;
//   warpgroup 2 (the outputs): O = Qs S, then O += M D.
// Chain a chunk: S plane -> K S -> R plane -> T R -> D plane -> Kd^T D -> S plane.  Named
// barriers between the warpgroups: 1 S ready (0 and 3 arrive, 1 and 2 wait), 2 D ready (1
// arrives, 0, 2 and 3 wait), 3 S free (2 arrives after Qs S, 0 and 3 wait before writing S),
// 4 D free (0, 2 and 3 arrive after reading D, 1 waits before writing the next D), 5 warpgroup
// 1's own.  512 threads at <= 128 registers: S split over two warpgroups so that no wgmma is
// serialised for want of registers (one warpgroup holding all of S at 384 threads was).
// Accumulators are not cleared between chunks (a real kernel would issue each product's first
// wgmma with scale-d = 0; clearing 64 registers a thread before the first one made ptxas serialise
// every wgmma of the O path, C7511): timing only, the values are meaningless.
// Build: nvcc -std=c++17 -O3 -arch=sm_90a -I kernels/cuda -I core/include wh.cu -o wh
// Run:   ./wh   (prints us a chunk step for several grids)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include "sm90a.cuh"

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                    \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

namespace wh {
constexpr unsigned N = 128, NA = N / 2;       /* value columns; a thread's m64n128 accumulators */
constexpr unsigned KC = (N / 8) * 128;        /* an 8-row k chunk of a B plane (2 KiB) */
constexpr unsigned TILE = 2048;               /* an m64 x k16 A tile */
/* bytes of dynamic shared memory */
/* a record: the A operands of one chunk (K, Qs, Kd^T, M, T diag(beta)), 64 KiB; LOADS: two of them */
constexpr unsigned KP = 0, QS = KP + 8 * TILE, KD = QS + 8 * TILE, MM = KD + 8 * TILE, TB = MM + 4 * TILE;
constexpr unsigned REC = TB + 4 * TILE;
template <bool LOADS> struct lay {
  static constexpr unsigned NREC = LOADS ? 2 : 1, SP = NREC * REC, RP = SP + 16 * KC, DP = RP + 8 * KC,
                            BAR = DP + 8 * KC, END = BAR + 64;
};

__device__ __forceinline__ void bar_sync(unsigned id, unsigned n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned id, unsigned n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ uint32_t h2(float a, float b) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(a), "f"(b));
  return r;
}
/* 16 accumulator rows (k chunks kc, kc + 1) of acc into a K-major B plane (as gdn_chunked_wg16.cuh's
 * put_plane, 128 columns) */
__device__ __forceinline__ void put_plane(uint32_t plane, unsigned kc, const float (&acc)[NA], unsigned lane) {
  const unsigned i = lane >> 3, j = lane & 7u;
#pragma unroll
  for (unsigned nt = 0; nt < NA / 4; nt += 2) {
    uint32_t h[4];
#pragma unroll
    for (unsigned m = 0; m < 4; m++) h[m] = h2(acc[4 * nt + 2 * m], acc[4 * nt + 2 * m + 1]);
    const uint32_t off = (kc + (i & 1u)) * KC + (nt + (i >> 1)) * 128u + j * 16u;
    sm90::stmatrix_x4_trans(plane + off, h[0], h[1], h[2], h[3]);
  }
}
/* the same for the 32 accumulators of an m64n64 product (P's plane): 8-row k chunks of 1 KiB */
__device__ __forceinline__ void put_plane64(uint32_t plane, unsigned kc, const float (&acc)[NA / 2], unsigned lane) {
  const unsigned i = lane >> 3, j = lane & 7u;
#pragma unroll
  for (unsigned nt = 0; nt < NA / 8; nt += 2) {
    uint32_t h[4];
#pragma unroll
    for (unsigned m = 0; m < 4; m++) h[m] = h2(acc[4 * nt + 2 * m], acc[4 * nt + 2 * m + 1]);
    const uint32_t off = (kc + (i & 1u)) * 1024u + (nt + (i >> 1)) * 128u + j * 16u;
    sm90::stmatrix_x4_trans(plane + off, h[0], h[1], h[2], h[3]);
  }
}
using MMA = sm90::wgmma_ss_f16<N>;
/* the same on m64n64k16 with bf16 operands (P = Q K^T's first k step) */
__device__ __forceinline__ void mma64_first(float (&d)[32], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
               : "l"(da), "l"(db));
}
/* d = A B on m64n128k16 (IEEE half operands), the accumulators' old values not read (scale-d = 0):
 * a product's first k step, so that d is dead between products */
__device__ __forceinline__ void mma128_first(float (&d)[64], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31]), "=f"(d[32]), "=f"(d[33]), "=f"(d[34]), "=f"(d[35]), "=f"(d[36]), "=f"(d[37]), "=f"(d[38]), "=f"(d[39]), "=f"(d[40]), "=f"(d[41]), "=f"(d[42]), "=f"(d[43]), "=f"(d[44]), "=f"(d[45]), "=f"(d[46]), "=f"(d[47]), "=f"(d[48]), "=f"(d[49]), "=f"(d[50]), "=f"(d[51]), "=f"(d[52]), "=f"(d[53]), "=f"(d[54]), "=f"(d[55]), "=f"(d[56]), "=f"(d[57]), "=f"(d[58]), "=f"(d[59]), "=f"(d[60]), "=f"(d[61]), "=f"(d[62]), "=f"(d[63])
               : "l"(da), "l"(db));
}

constexpr uint64_t STEP_A = TILE >> 4, STEP_B = (2 * KC) >> 4;
}  // namespace wh

/* LOADS: a 17th warp brings each chunk's record from global memory (rec + (block nch + c) REC)
 * into one of two buffers by one bulk copy; full[b] completes on its bytes, empty[b] on one
 * arrival from each of the four warpgroups once they are done with the chunk's planes. */
template <bool LOADS>
__global__ void __launch_bounds__(LOADS ? 544 : 512, 1) whole_head_steps(float *sink, const unsigned char *rec,
                                                                        unsigned nch, float gl) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace wh;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned tid = threadIdx.x, wg = tid / 128, w = (tid % 128) / 32, lane = tid % 32;
  const uint32_t s0 = sm90::smem_u32(smem);
  using Y = lay<LOADS>;
  for (unsigned x = tid; x < Y::BAR / 4; x += blockDim.x) reinterpret_cast<uint32_t *>(smem)[x] = 0x3c003c00u * ((x & 7) == 0);
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + Y::BAR), *empty = full + 2;
  if (LOADS && tid == 0) {
    for (unsigned b = 0; b < 2; b++) sm90::mbar_init_count(&full[b], 1), sm90::mbar_init_count(&empty[b], 4);
    sm90::mbar_init_fence();
  }
  sm90::fence_proxy_async();
  __syncthreads();
  const uint64_t dK = sm90::desc_plain(s0 + KP, 128, 256), dQ = sm90::desc_plain(s0 + QS, 128, 256);
  const uint64_t dKd = sm90::desc_plain(s0 + KD, 128, 256), dM = sm90::desc_plain(s0 + MM, 128, 256);
  const uint64_t dT = sm90::desc_plain(s0 + TB, 128, 256);
  const uint64_t dS = sm90::desc_plain(s0 + Y::SP, KC, 128), dR = sm90::desc_plain(s0 + Y::RP, KC, 128),
                 dD = sm90::desc_plain(s0 + Y::DP, KC, 128);
  const uint32_t SP = Y::SP, RP = Y::RP, DP = Y::DP;
  /* the record buffer of chunk c (a descriptor offset), after its copy has landed */
  auto rec_of = [&](unsigned c) -> uint64_t {
    if (!LOADS) return 0;
    sm90::mbar_wait(&full[c & 1], (c >> 1) & 1);
    return (uint64_t)((c & 1) * (REC >> 4));
  };
  auto done_with = [&](unsigned c) {
    if (LOADS && tid % 128 == 0) sm90::mbar_arrive(&empty[c & 1]);
  };
  float out = 0.0f;
  if (wg == 0 || wg == 3) { /* the state: warpgroup 0 its rows 0..63 (of dk), warpgroup 3 rows 64.. */
    const unsigned half = wg == 3;
    float s[NA];
#pragma unroll
    for (unsigned i = 0; i < NA; i++) s[i] = 0.01f * (i + tid);
    put_plane(s0 + SP, 8 * half + 2 * w, s, lane);
    sm90::fence_proxy_async();
    bar_arrive(1, 512);
    for (unsigned c = 0; c < nch; c++) {
      const uint64_t ro = rec_of(c);
      bar_sync(2, 512); /* D ready */
#pragma unroll
      for (unsigned i = 0; i < NA; i++) s[i] *= gl;
      sm90::pin(s);
      sm90::wgmma_fence();
#pragma unroll
      for (unsigned kb = 0; kb < 4; kb++) MMA::run(s, ro + dKd + (2 * kb + half) * STEP_A, dD + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(s);
      done_with(c);
      bar_arrive(4, 512); /* D free (this warpgroup's part) */
      bar_sync(3, 384);   /* S free: Qs S done */
      put_plane(s0 + SP, 8 * half + 2 * w, s, lane);
      sm90::fence_proxy_async();
      if (c + 1 < nch) bar_arrive(1, 512); /* S ready */
    }
    out = s[0] + s[NA - 1];
  } else if (wg == 1) { /* the values */
    float p[NA];
#pragma unroll
    for (unsigned i = 0; i < NA; i++) p[i] = 0.0f;
    for (unsigned c = 0; c < nch; c++) {
      const uint64_t ro = rec_of(c);
      bar_sync(1, 512); /* S ready */
      sm90::pin(p);
      sm90::wgmma_fence();
#pragma unroll
      for (unsigned kb = 0; kb < 8; kb++) MMA::run(p, ro + dK + kb * STEP_A, dS + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(p);
#pragma unroll
      for (unsigned i = 0; i < NA; i++) p[i] = 0.5f - gl * p[i]; /* R = V - e^G P */
      put_plane(s0 + RP, 2 * w, p, lane);
      sm90::fence_proxy_async();
      bar_sync(5, 128);
      sm90::pin(p); /* D (onto R's values: timing only) */
      sm90::wgmma_fence();
#pragma unroll
      for (unsigned kb = 0; kb < 4; kb++) MMA::run(p, ro + dT + kb * STEP_A, dR + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(p);
      done_with(c);
      if (c > 0) bar_sync(4, 512); /* D free */
      put_plane(s0 + DP, 2 * w, p, lane);
      sm90::fence_proxy_async();
      bar_arrive(2, 512); /* D ready */
    }
    bar_sync(4, 512);
    out = p[0] + p[1];
  } else if (wg == 2) { /* the outputs */
    float o[NA];
#pragma unroll
    for (unsigned i = 0; i < NA; i++) o[i] = 0.0f;
    for (unsigned c = 0; c < nch; c++) {
      const uint64_t ro = rec_of(c);
      bar_sync(1, 512); /* S ready */
      sm90::pin(o);
      sm90::wgmma_fence();
#pragma unroll
      for (unsigned kb = 0; kb < 8; kb++) MMA::run(o, ro + dQ + kb * STEP_A, dS + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(o);
      bar_arrive(3, 384); /* S free */
      bar_sync(2, 512);   /* D ready */
      sm90::pin(o);
      sm90::wgmma_fence();
#pragma unroll
      for (unsigned kb = 0; kb < 4; kb++) MMA::run(o, ro + dM + kb * STEP_A, dD + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(o);
      done_with(c);
      bar_arrive(4, 512); /* D free (this warpgroup's part) */
    }
    out = o[0] - o[NA - 1];
  } else if (LOADS && tid == 512) { /* the loader warp's first thread */
    const unsigned char *src = rec + (size_t)blockIdx.x * nch * REC;
    for (unsigned c = 0; c < nch; c++) {
      if (c >= 2) sm90::mbar_wait(&empty[c & 1], ((c >> 1) - 1) & 1);
      sm90::bulk_copy(smem + (c & 1) * REC, src + (size_t)c * REC, REC, &full[c & 1]);
    }
  }
  if (out == 12345.678f) sink[blockIdx.x * 544 + tid] = out; /* keeps the work alive */
#endif
}

/* INPUTS: the step as it would run from the inputs (FlashQLA's form), no record.  A chunk
 * brings q and k (16 KiB each, from the key head's region: blocks 2i and 2i + 1 read the same, as
 * a key head's two value heads would), v (16 KiB) and T diag(beta) (8 KiB) by four bulk copies.
 * The outputs warpgroup also forms P = Q K^T (m64n64, bf16 operands for timing), its masked and
 * decayed 64 x 64 into a plane, O = Q S scaled by e^G, O += P D, and stores O (bf16, 16 KiB a
 * chunk) to global memory; the values warpgroup reads V from shared memory for R and writes D
 * twice (as is for O, times e^(G_L - G) for the state); the state warpgroups multiply by K^T. */
namespace whi {
using namespace wh;
constexpr unsigned QB = 0, KB = QB + 8 * TILE, VB = KB + 8 * TILE, AB = VB + 8 * TILE, IN = AB + 4 * TILE; /* 56 KiB */
constexpr unsigned SP = 2 * IN, RP = SP + 16 * KC, VD = RP + 8 * KC, VN = VD + 8 * KC, PG = VN + 8 * KC,
                   BAR = PG + 4 * TILE, END = BAR + 64;
}  // namespace whi

/* OV: bit 0 the outputs warpgroup forms P = Q K^T and its plane, bit 1 it stores O (both: the step
 * as it would run); bit 3 P's plane and O's stage written by stmatrix as put_plane writes (free of
 * bank conflicts; the layout is the B planes', so only the cost is real); bit 2 the two changes that take the outputs off the chain's cycle: S in two
 * planes (chunk c's in plane c % 2, so Q S of chunk c gates only the write of chunk c + 2's), and
 * O staged in shared memory (where P's plane was) and sent by one bulk store a chunk.  Shared
 * memory with bit 2: R and the decayed D share a plane (R is made after the state has read the
 * last decayed D), P's plane and O's stage share one. */
template <unsigned OV>
__global__ void __launch_bounds__(544, 1) inputs_steps(float *sink, const unsigned char *qk, const unsigned char *va,
                                                       uint16_t *o, unsigned nch, float gl) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace whi;
  constexpr bool FIX = OV & 4;
  /* with FIX: S0 S1 (two planes), VD, VN (R too), PG (O's stage too: 16 KiB) */
  constexpr unsigned SP = 2 * IN, SP1 = SP + 16 * KC, RP = FIX ? SP1 + 24 * KC : whi::RP,
                     VD = FIX ? SP1 + 16 * KC : whi::VD, VN = FIX ? RP : whi::VN, PG = FIX ? VD + 16 * KC : whi::PG,
                     BAR = FIX ? PG + 8 * KC : whi::BAR;
  static_assert(!FIX || BAR + 64 <= 232448, "fits a block's shared memory");
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned tid = threadIdx.x, wg = tid / 128, w = (tid % 128) / 32, lane = tid % 32;
  const uint32_t s0 = sm90::smem_u32(smem);
  for (unsigned x = tid; x < BAR / 4; x += blockDim.x) reinterpret_cast<uint32_t *>(smem)[x] = 0x3c003c00u * ((x & 7) == 0);
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + BAR), *empty = full + 2;
  if (tid == 0) {
    for (unsigned b = 0; b < 2; b++) sm90::mbar_init_count(&full[b], 4), sm90::mbar_init_count(&empty[b], 4);
    sm90::mbar_init_fence();
  }
  sm90::fence_proxy_async();
  __syncthreads();
  const uint64_t dQ = sm90::desc_plain(s0 + QB, 128, 256), dK = sm90::desc_plain(s0 + KB, 128, 256);
  const uint64_t dA = sm90::desc_plain(s0 + AB, 128, 256), dP = sm90::desc_plain(s0 + PG, 128, 256);
  const uint64_t dS = sm90::desc_plain(s0 + SP, KC, 128), dR = sm90::desc_plain(s0 + RP, KC, 128),
                 dVd = sm90::desc_plain(s0 + VD, KC, 128), dVn = sm90::desc_plain(s0 + VN, KC, 128);
  auto in_of = [&](unsigned c) -> uint64_t {
    sm90::mbar_wait(&full[c & 1], (c >> 1) & 1);
    return (uint64_t)((c & 1) * (IN >> 4));
  };
  auto done_with = [&](unsigned c) {
    if (tid % 128 == 0) sm90::mbar_arrive(&empty[c & 1]);
  };
  /* Barriers.  Without FIX as whole_head_steps.  With FIX each consumer has its own: 1 S ready
   * for the values (state arrives, 384), 8 / 9 S ready for the outputs by the chunk's parity
   * (384), 2 D ready for the state (384), 10 / 11 D ready for the outputs by parity (256), 3 / 7
   * S free by parity (384), 4 D free (512); the parities keep an arrival a chunk ahead off a
   * barrier whose waiters have not come yet. */
  const unsigned NS = FIX ? 384 : 512;
  /* S's plane of chunk c as a B operand */
  auto s_of = [&](unsigned c) -> uint64_t { return dS + (FIX ? (uint64_t)((c & 1) * ((16 * KC) >> 4)) : 0); };
  float out = 0.0f;
  if (wg == 0 || wg == 3) { /* the state */
    const unsigned half = wg == 3;
    float s[NA];
#pragma unroll
    for (unsigned i = 0; i < NA; i++) s[i] = 0.01f * (i + tid);
    put_plane(s0 + SP, 8 * half + 2 * w, s, lane);
    sm90::fence_proxy_async();
    bar_arrive(1, NS);
    if (FIX) bar_arrive(8, 384);
    for (unsigned c = 0; c < nch; c++) {
      const uint64_t ro = in_of(c);
      bar_sync(2, NS); /* D ready */
#pragma unroll
      for (unsigned i = 0; i < NA; i++) s[i] *= gl;
      sm90::pin(s);
      sm90::wgmma_fence();
#pragma unroll
      for (unsigned kb = 0; kb < 4; kb++) MMA::run(s, ro + dK + (2 * kb + half) * STEP_A, dVn + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(s);
      done_with(c);
      bar_arrive(4, 512);
      /* FIX: Q S of chunk c - 1 read the plane written now; one barrier a plane (3, 7), or the
       * outputs, a chunk ahead, would arrive twice on one barrier before the state waits */
      if (!FIX) bar_sync(3, 384);
      else if (c >= 1) bar_sync((c - 1) & 1 ? 7 : 3, 384);
      put_plane(s0 + SP + (FIX ? ((c + 1) & 1) * 16 * KC : 0), 8 * half + 2 * w, s, lane);
      sm90::fence_proxy_async();
      if (c + 1 < nch) {
        bar_arrive(1, NS);
        if (FIX) bar_arrive(8 + ((c + 1) & 1), 384);
      }
    }
    if (FIX) bar_sync((nch - 1) & 1 ? 7 : 3, 384);
    out = s[0] + s[NA - 1];
  } else if (wg == 1) { /* the values */
    float p[NA];
#pragma unroll
    for (unsigned i = 0; i < NA; i++) p[i] = 0.0f;
    for (unsigned c = 0; c < nch; c++) {
      const uint64_t ro = in_of(c);
      const uint32_t vb = s0 + (c & 1) * IN + VB;
      bar_sync(1, NS);
      sm90::pin(p);
      sm90::wgmma_fence();
#pragma unroll
      for (unsigned kb = 0; kb < 8; kb++) MMA::run(p, ro + dK + kb * STEP_A, s_of(c) + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(p);
      /* R = V - e^G P, V's pair of each accumulator pair from shared memory */
#pragma unroll
      for (unsigned i = 0; i < NA; i += 2) {
        uint32_t v2;
        const uint32_t a = vb + ((16 * w + (lane >> 2) + 8 * ((i >> 1) & 1)) * 128 + 8 * (i >> 2) + 2 * (lane & 3)) * 2;
        asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v2) : "r"(a));
        p[i] = __uint_as_float(v2 << 16) - gl * p[i];
        p[i + 1] = __uint_as_float(v2 & 0xffff0000u) - gl * p[i + 1];
      }
      put_plane(s0 + RP, 2 * w, p, lane);
      sm90::fence_proxy_async();
      bar_sync(5, 128);
      sm90::pin(p);
      sm90::wgmma_fence();
#pragma unroll
      for (unsigned kb = 0; kb < 4; kb++) MMA::run(p, ro + dA + kb * STEP_A, dR + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(p);
      done_with(c);
      if (c > 0) bar_sync(4, 512);
      put_plane(s0 + VD, 2 * w, p, lane); /* D for O */
#pragma unroll
      for (unsigned i = 0; i < NA; i++) p[i] *= gl; /* e^(G_L - G) D for the state */
      put_plane(s0 + VN, 2 * w, p, lane);
      sm90::fence_proxy_async();
      bar_arrive(2, NS);
      if (FIX) bar_arrive(10 + (c & 1), 256);
    }
    bar_sync(4, 512);
    out = p[0] + p[1];
  } else if (wg == 2) { /* the outputs */
    float a[NA], pq[NA / 2];
    uint16_t *ob = o + (size_t)blockIdx.x * nch * 64 * 128;
    for (unsigned c = 0; c < nch; c++) {
      const uint64_t ro = in_of(c);
      if (FIX && (OV & 2)) { /* O's stage (P's plane) read by the last bulk store */
        if (tid % 128 == 0) sm90::bulk_wait_read();
        bar_sync(6, 128);
      }
      /* P = Q K^T, masked and decayed, into its plane (off the chain) */
      if (OV & 1) {
      sm90::wgmma_fence();
      mma64_first(pq, ro + dQ, ro + dK);
#pragma unroll
      for (unsigned kb = 1; kb < 8; kb++) sm90::wgmma_ss<64>::run(pq, ro + dQ + kb * STEP_A, ro + dK + kb * STEP_A);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(pq);
#pragma unroll
      for (unsigned i = 0; i < NA / 2; i++) {
        const unsigned r = 16 * w + (lane >> 2) + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
        pq[i] = col <= r ? pq[i] * gl : 0.0f; /* the decay e^(G_r - G_col): one multiply for timing */
      }
      if (OV & 8)
        put_plane64(s0 + PG, 2 * w, pq, lane);
      else
#pragma unroll
        for (unsigned i = 0; i < NA / 2; i += 2)
          asm volatile("st.shared.b32 [%0], %1;" ::"r"(s0 + PG + (tid % 128) * 64 + 4 * i), "r"(h2(pq[i], pq[i + 1])));
      sm90::fence_proxy_async();
      bar_sync(6, 128);
      }
      if (FIX)
        bar_sync(8 + (c & 1), 384); /* S ready */
      else
        bar_sync(1, 512);
      sm90::wgmma_fence();
      mma128_first(a, ro + dQ, s_of(c));
#pragma unroll
      for (unsigned kb = 1; kb < 8; kb++) MMA::run(a, ro + dQ + kb * STEP_A, s_of(c) + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(a);
      bar_arrive(FIX && (c & 1) ? 7 : 3, 384); /* S free */
#pragma unroll
      for (unsigned i = 0; i < NA; i++) a[i] *= gl; /* e^G */
      if (FIX)
        bar_sync(10 + (c & 1), 256); /* D ready */
      else
        bar_sync(2, 512);
      sm90::pin(a);
      sm90::wgmma_fence();
#pragma unroll
      for (unsigned kb = 0; kb < 4; kb++) MMA::run(a, dP + kb * STEP_A, dVd + kb * STEP_B);
      sm90::wgmma_commit();
      sm90::wgmma_wait0();
      sm90::pin(a);
      done_with(c);
      bar_arrive(4, 512);
      /* O out: a thread's 64 values as 8 16-byte stores (FIX: into the stage, then one bulk store) */
      uint16_t *oc = ob + (size_t)c * 64 * 128 + (tid % 128) * 64;
      unsigned char *stage = smem + PG + (tid % 128) * 128;
      if ((OV & 8) && (OV & 2)) put_plane(s0 + PG, 2 * w, a, lane);
#pragma unroll
      for (unsigned i = 0; i < (OV & 2 && !(OV & 8) ? NA : 0); i += 8) {
        uint4 v;
        v.x = h2(a[i], a[i + 1]), v.y = h2(a[i + 2], a[i + 3]), v.z = h2(a[i + 4], a[i + 5]), v.w = h2(a[i + 6], a[i + 7]);
        if (FIX)
          *reinterpret_cast<uint4 *>(stage + 2 * i) = v;
        else
          *reinterpret_cast<uint4 *>(oc + i) = v;
      }
      if (FIX && (OV & 2)) {
        sm90::fence_proxy_async();
        bar_sync(6, 128);
        if (tid % 128 == 0) {
          sm90::bulk_store(ob + (size_t)c * 64 * 128, smem + PG, 64 * 128 * 2);
          sm90::bulk_commit();
        }
      }
    }
    if (FIX && (OV & 2) && tid % 128 == 0) sm90::bulk_wait_read();
    out = 0.0f; /* O went to global memory */
  } else if (tid == 512) { /* the loader */
    const unsigned char *q0 = qk + (size_t)(blockIdx.x / 2) * nch * 2 * 8 * TILE;
    const unsigned char *v0 = va + (size_t)blockIdx.x * nch * (12 * TILE);
    for (unsigned c = 0; c < nch; c++) {
      if (c >= 2) sm90::mbar_wait(&empty[c & 1], ((c >> 1) - 1) & 1);
      unsigned char *b = smem + (c & 1) * IN;
      sm90::bulk_copy(b + QB, q0 + (size_t)c * 16 * TILE, 8 * TILE, &full[c & 1]);
      sm90::bulk_copy(b + KB, q0 + (size_t)c * 16 * TILE + 8 * TILE, 8 * TILE, &full[c & 1]);
      sm90::bulk_copy(b + VB, v0 + (size_t)c * 12 * TILE, 8 * TILE, &full[c & 1]);
      sm90::bulk_copy(b + AB, v0 + (size_t)c * 12 * TILE + 8 * TILE, 4 * TILE, &full[c & 1]);
    }
  }
  if (out == 12345.678f) sink[blockIdx.x * 544 + tid] = out;
#endif
}

static void run_inputs(float *sink, unsigned nch) {
  using namespace whi;
  const unsigned smem = END;
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, inputs_steps<3>));
  unsigned char *qk, *va;
  uint16_t *o;
  const size_t nq = (size_t)132 * nch * 16 * TILE, nvb = (size_t)264 * nch * 12 * TILE, no = (size_t)264 * nch * 64 * 128 * 2;
  CK(cudaMalloc(&qk, nq));
  CK(cudaMalloc(&va, nvb));
  CK(cudaMalloc(&o, no));
  CK(cudaMemset(qk, 0, nq));
  CK(cudaMemset(va, 0, nvb));
  printf("from the inputs (q, k, v, T diag(beta): 56 KiB a chunk, q and k shared by block pairs; O stored): 544 threads, %u bytes of shared memory, %d registers\n",
         smem, fa.numRegs);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  void (*kern[6])(float *, const unsigned char *, const unsigned char *, uint16_t *, unsigned, float) = {
      inputs_steps<0>, inputs_steps<1>, inputs_steps<2>, inputs_steps<3>, inputs_steps<7>, inputs_steps<15>};
  const char *what[6] = {"without P and O's stores", "with P, without O's stores", "without P, with O's stores",
                         "with P and O's stores", "with P and O's stores, S in two planes, O by a bulk store",
                         "the same, P's plane and O's stage by stmatrix"};
  const unsigned smem_of[6] = {smem, smem, smem, smem, 229440, 229440};
  for (unsigned ov = 0; ov < 6; ov++) {
    const unsigned smem = smem_of[ov];
    CK(cudaFuncSetAttribute(kern[ov], cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    printf(" %s\n", what[ov]);
    for (unsigned grid : {1u, 32u, 64u, 132u, 264u}) {
      kern[ov]<<<grid, 544, smem>>>(sink, qk, va, o, nch, 0.999f);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      float best = 1e30f, sum = 0.0f;
      const int reps = 7;
      for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a));
        kern[ov]<<<grid, 544, smem>>>(sink, qk, va, o, nch, 0.999f);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        best = ms < best ? ms : best;
        sum += ms;
      }
      printf("  grid %3u: %u chunk steps a block, best %.3f ms, mean %.3f ms: %.3f us a step (best)\n", grid, nch,
             best, sum / reps, best * 1000.0f / nch);
    }
  }
}

template <bool LOADS> static void run_grids(float *sink, const unsigned char *rec, unsigned nch) {
  using namespace wh;
  const unsigned smem = lay<LOADS>::END, threads = LOADS ? 544 : 512;
  CK(cudaFuncSetAttribute(whole_head_steps<LOADS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int nb = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, whole_head_steps<LOADS>, threads, smem));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, whole_head_steps<LOADS>));
  printf("%s: %u threads, %u bytes of shared memory, %d registers, %d blocks an SM\n",
         LOADS ? "records loaded (64 KiB a chunk from global memory)" : "operands resident", threads, smem,
         fa.numRegs, nb);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (unsigned grid : {1u, 32u, 64u, 132u, 264u}) {
    whole_head_steps<LOADS><<<grid, threads, smem>>>(sink, rec, nch, 0.999f); /* warm-up */
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    float best = 1e30f, sum = 0.0f;
    const int reps = 7;
    for (int r = 0; r < reps; r++) {
      CK(cudaEventRecord(a));
      whole_head_steps<LOADS><<<grid, threads, smem>>>(sink, rec, nch, 0.999f);
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      best = ms < best ? ms : best;
      sum += ms;
    }
    printf("  grid %3u: %u chunk steps a block, best %.3f ms, mean %.3f ms: %.3f us a step (best)\n", grid, nch,
           best, sum / reps, best * 1000.0f / nch);
  }
}

int main() {
  setvbuf(stdout, NULL, _IONBF, 0); /* what ran survives a timeout */
  const unsigned nch = 256;
  float *sink;
  CK(cudaMalloc(&sink, 1024 * 544 * sizeof(float)));
  unsigned char *rec;
  const size_t bytes = (size_t)264 * nch * wh::REC;
  CK(cudaMalloc(&rec, bytes));
  CK(cudaMemset(rec, 0, bytes));
  run_grids<false>(sink, rec, nch);
  run_grids<true>(sink, rec, nch);
  CK(cudaFree(rec));
  run_inputs(sink, nch);
  return 0;
}
