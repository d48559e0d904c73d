/* Ampere (sm_80 and later, NVIDIA only) primitives shared by the tensor-core kernels:
 * asynchronous 16-byte copies from global to shared memory.  Include only where the
 * kernel is built for NVIDIA (not HIP). */
#ifndef METRALE_KERNELS_CUDA_SM80_CUH
#define METRALE_KERNELS_CUDA_SM80_CUH

namespace sm80 {

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* 16 bytes global -> shared without registers; bytes = 0 writes zeros (src is not read). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, uint32_t bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* Waits until at most N committed groups of this thread's copies are in flight. */
template <int N> __device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace sm80

#endif
