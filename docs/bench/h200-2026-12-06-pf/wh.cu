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
using MMA = sm90::wgmma_ss_f16<N>;
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
  const unsigned nch = 256;
  float *sink;
  CK(cudaMalloc(&sink, 1024 * 544 * sizeof(float)));
  unsigned char *rec;
  const size_t bytes = (size_t)264 * nch * wh::REC;
  CK(cudaMalloc(&rec, bytes));
  CK(cudaMemset(rec, 0, bytes));
  run_grids<false>(sink, rec, nch);
  run_grids<true>(sink, rec, nch);
  return 0;
}
