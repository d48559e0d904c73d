/* Hopper (sm_90a) primitives shared by the kernels that have a wgmma or bulk-copy form:
 * warpgroup MMA ordering, the shared-memory descriptor of an unswizzled operand, bulk
 * copies completed on an mbarrier, and stmatrix.  Include only inside a
 * __CUDA_ARCH_FEAT_SM90_ALL guard. */
#ifndef METRALE_KERNELS_CUDA_SM90A_CUH
#define METRALE_KERNELS_CUDA_SM90A_CUH

namespace sm90 {

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- warpgroup MMA ordering ---------------------------------------------------------- */

/* The tensor cores (async proxy) read what this thread wrote to shared memory. */
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/* Waits until at most N committed groups of this warpgroup's MMAs are in flight. */
template <unsigned N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void wgmma_wait0() { wgmma_wait<0>(); }

/* Keeps the compiler from moving accesses of accumulators d across this point: put it
 * before wgmma_fence and after wgmma_wait0, or ptxas sees them read while MMAs are in
 * flight and serializes every wgmma of the kernel. */
template <unsigned N> __device__ __forceinline__ void pin(float (&d)[N]) {
#pragma unroll
  for (unsigned i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* Descriptor of an unswizzled K-major bf16 operand: 8x8 core matrices of 8 rows of 16
 * bytes (128 contiguous bytes), lbo bytes between core matrices adjacent in k, sbo bytes
 * between 8-row groups. */
__device__ __forceinline__ uint64_t desc_plain(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFFu) >> 4) | (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32;
}

/* d += A B on m64nNk16, f32 accumulators (N / 2 a thread), A and B K-major bf16 in shared
 * memory (descriptors). */
template <unsigned N> struct wgmma_ss;
template <> struct wgmma_ss<32> {
  static __device__ __forceinline__ void run(float (&d)[16], uint64_t da, uint64_t db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "%16, %17, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db));
  }
};

template <> struct wgmma_ss<64> {
  static __device__ __forceinline__ void run(float (&d)[32], uint64_t da, uint64_t db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db));
  }
};

/* The left half of the columns of a thread's A wgmma accumulators: 8-column tile j is in
 * registers 4 j .. 4 j + 3, so the left half is the first A / 2 registers, the accumulators
 * of an MMA half as wide. */
template <unsigned A> __device__ __forceinline__ float (&left_half(float (&d)[A]))[A / 2] {
  return *reinterpret_cast<float(*)[A / 2]>(&d[0]);
}

/* Four 8x8 b16 matrices from the mma fragment layout (lane l: row l / 4, columns
 * 2 (l % 4) and + 1 of each) stored transposed: the row address of matrix i's row j (its
 * column j) comes from lane 8 i + j. */
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1,
                                                  uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

/* ---- bulk copies completed on an mbarrier ------------------------------------------- */

__device__ __forceinline__ void mbar_init(uint64_t *bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* bytes (a multiple of 16, both addresses 16-byte aligned) from global src to shared dst;
 * the barrier's current phase completes when they have landed.  One thread issues it. */
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}

/* Waits until the barrier's phase of this parity has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

}  // namespace sm90

#endif
