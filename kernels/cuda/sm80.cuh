/* Ampere (sm_80 and later, NVIDIA only) primitives shared by the tensor-core kernels:
 * asynchronous 16-byte copies from global to shared memory, ldmatrix and mma.sync.  Include only where the
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

/* 16 bytes from registers to shared memory (where a chunk cannot be copied whole). */
__device__ __forceinline__ void st_shared16(uint32_t dst, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
/* Four 8x8 b16 matrices from shared memory, lane l giving the row address of matrix l / 8. */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
/* Two 8x8 b16 matrices from shared memory, lane l < 16 giving the row address of matrix l / 8. */
__device__ __forceinline__ void ldsm_x2(uint32_t r[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
/* c += a b: mma.sync m16n8k16, bf16 operands, f32 accumulators. */
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
/* The byte offset of 16-byte chunk c (0..3) of row r in a tile of 64-byte bf16 rows whose
 * chunks are XOR-permuted, so that the 8 rows one ldmatrix reads fall in different banks. */
__device__ __forceinline__ uint32_t swz64(unsigned r, unsigned c) { return r * 64u + ((c ^ ((r >> 1) & 3u)) << 4); }

}  // namespace sm80

#endif
