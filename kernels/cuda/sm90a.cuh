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

/* The async proxy (tensor cores, bulk copies) reads what this thread wrote to shared memory. */
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

/* The registers of the calling warpgroup's threads, given back (dec) or taken (inc) from the
 * block's pool: a warp-specialised kernel's producer keeps few, its consumers' accumulators
 * take the rest.  The whole warpgroup executes it. */
template <unsigned R> __device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <unsigned R> __device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

/* Descriptor of a K-major 16-bit tile of 64-byte rows (32 elements of k) whose 16-byte chunks
 * are XOR-permuted exactly as the hardware's 64-byte swizzle (sm80::swz64; tile base 512-byte
 * aligned), 8-row groups 512 bytes apart (the leading offset is unused for swizzled K-major).
 * The k16 half of a row 32 bytes on is this descriptor plus 2. */
__device__ __forceinline__ uint64_t desc_swz64(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFFu) >> 4) | (uint64_t)1 << 16 | (uint64_t)(512u >> 4) << 32 |
         (uint64_t)2 << 62;
}

/* The accumulators of an m64nNk16 wgmma, N / 2 f32 registers a thread, as asm operands
 * %0 .. %(N/2 - 1): MK_ACC_<N/2> lists them for the instruction text, MK_ACC_OPS_<N/2>(d)
 * binds them to d[0 ..] ("+f": read and written).  Each list extends the one before it, so
 * the numbering is written out once for every width. */
#define MK_ACC_16 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define MK_ACC_32 MK_ACC_16 ", " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MK_ACC_64 MK_ACC_32 ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, " \
  "%49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define MK_ACC_96 MK_ACC_64 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, " \
  "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define MK_ACC_128 MK_ACC_96 ", " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, " \
  "%126, %127"
#define MK_ACC_OPS_16(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define MK_ACC_OPS_32(d) MK_ACC_OPS_16(d), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define MK_ACC_OPS_64(d) MK_ACC_OPS_32(d), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define MK_ACC_OPS_96(d) MK_ACC_OPS_64(d), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define MK_ACC_OPS_128(d) MK_ACC_OPS_96(d), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

/* d += A B on m64nNk16, f32 accumulators (N / 2 a thread), A and B K-major bf16: wgmma_ss
 * with both in shared memory (descriptors), wgmma_rs with A as the mma.m16n8k16 fragment of
 * each warp's 16 rows in registers. */
template <unsigned N> struct wgmma_ss;
template <unsigned N> struct wgmma_rs;
/* wgmma_ss with IEEE half operands (the same layouts and descriptors: 16-bit elements) */
template <unsigned N> struct wgmma_ss_f16;
#define MK_WGMMA_SS_T(NAME, TY, N, ACC, OPS, DA, DB)                                              \
  template <> struct NAME<N> {                                                                    \
    static __device__ __forceinline__ void run(float (&d)[N / 2], uint64_t da, uint64_t db) {     \
      asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" ACC "}, %" #DA \
                   ", %" #DB ", 1, 1, 1, 0, 0;\n"                                                 \
                   : OPS(d)                                                                      \
                   : "l"(da), "l"(db));                                                          \
    }                                                                                            \
  };
#define MK_WGMMA_RS(N, ACC, OPS, A0, A1, A2, A3, DB)                                              \
  template <> struct wgmma_rs<N> {                                                                \
    static __device__ __forceinline__ void run(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db) { \
      asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" ACC "}, {%" #A0   \
                   ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #DB ", 1, 1, 1, 0;\n"                    \
                   : OPS(d)                                                                      \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));                       \
    }                                                                                            \
  };
#define MK_WGMMA_SS(N, ACC, OPS, DA, DB) MK_WGMMA_SS_T(wgmma_ss, "bf16", N, ACC, OPS, DA, DB)
MK_WGMMA_SS(32, MK_ACC_16, MK_ACC_OPS_16, 16, 17)
MK_WGMMA_SS(64, MK_ACC_32, MK_ACC_OPS_32, 32, 33)
MK_WGMMA_SS(128, MK_ACC_64, MK_ACC_OPS_64, 64, 65)
MK_WGMMA_SS(256, MK_ACC_128, MK_ACC_OPS_128, 128, 129)
MK_WGMMA_SS_T(wgmma_ss_f16, "f16", 32, MK_ACC_16, MK_ACC_OPS_16, 16, 17)
MK_WGMMA_SS_T(wgmma_ss_f16, "f16", 128, MK_ACC_64, MK_ACC_OPS_64, 64, 65) /* 64-row ws tiles */
MK_WGMMA_SS_T(wgmma_ss_f16, "f16", 256, MK_ACC_128, MK_ACC_OPS_128, 128, 129)
/* IEEE half operands with the A operand's layout and the accumulate chosen per call: first()
 * ignores d's old values (scale-d 0: a product's first k step, so d need not be cleared),
 * the _ta forms read A MN-major (transposed: its 16-byte rows run along m) */
template <unsigned N> struct wgmma_f16x;
#define MK_WGMMA_F16X_ONE(FN, N, ACC, OPS, DA, DB, SCALE_D, TA)                                \
  static __device__ __forceinline__ void FN(float (&d)[N / 2], uint64_t da, uint64_t db) {     \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " #SCALE_D ", 0;\n"                        \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16 {" ACC "}, %" #DA     \
                 ", %" #DB ", p, 1, 1, " #TA ", 0;\n}\n"                                       \
                 : OPS(d)                                                                      \
                 : "l"(da), "l"(db));                                                          \
  }
#define MK_WGMMA_F16X(N, ACC, OPS, DA, DB)                                                     \
  template <> struct wgmma_f16x<N> {                                                           \
    MK_WGMMA_F16X_ONE(run, N, ACC, OPS, DA, DB, 1, 0)                                          \
    MK_WGMMA_F16X_ONE(first, N, ACC, OPS, DA, DB, 0, 0)                                        \
    MK_WGMMA_F16X_ONE(run_ta, N, ACC, OPS, DA, DB, 1, 1)                                       \
  };
MK_WGMMA_F16X(64, MK_ACC_32, MK_ACC_OPS_32, 32, 33)
MK_WGMMA_F16X(128, MK_ACC_64, MK_ACC_OPS_64, 64, 65)
#undef MK_WGMMA_F16X
#undef MK_WGMMA_F16X_ONE
MK_WGMMA_RS(128, MK_ACC_64, MK_ACC_OPS_64, 64, 65, 66, 67, 68)
MK_WGMMA_RS(192, MK_ACC_96, MK_ACC_OPS_96, 96, 97, 98, 99, 100)
MK_WGMMA_RS(256, MK_ACC_128, MK_ACC_OPS_128, 128, 129, 130, 131, 132)
#undef MK_WGMMA_SS
#undef MK_WGMMA_SS_T
#undef MK_WGMMA_RS
#undef MK_ACC_16
#undef MK_ACC_32
#undef MK_ACC_64
#undef MK_ACC_96
#undef MK_ACC_128
#undef MK_ACC_OPS_16
#undef MK_ACC_OPS_32
#undef MK_ACC_OPS_64
#undef MK_ACC_OPS_96
#undef MK_ACC_OPS_128

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

/* The same four matrices stored as they are (not transposed): matrix i's row j (the
 * fragment's row j) to the address from lane 8 i + j. */
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

/* ---- named barriers ------------------------------------------------------------------ */

/* Barrier id (1..15; 0 is __syncthreads) of n threads (a multiple of 32): bar_sync waits for
 * all n, bar_arrive counts this warp without waiting (a producer's signal), bar_any waits and
 * says whether any participating thread's x was true.  Each orders the shared-memory writes
 * before it for the threads that wait. */
__device__ __forceinline__ void bar_sync(unsigned id, unsigned n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned id, unsigned n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ bool bar_any(unsigned id, unsigned n, bool x) {
  uint32_t r;
  asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 q, %1, 0;\nbar.red.or.pred p, %2, %3, q;\nselp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(r)
               : "r"((uint32_t)x), "r"(id), "r"(n)
               : "memory");
  return r != 0;
}

/* ---- bulk copies completed on an mbarrier ------------------------------------------- */

/* An mbarrier whose phases complete after `count` arrivals; mbar_init_fence then makes a
 * set of them ready for the other threads of the cluster. */
__device__ __forceinline__ void mbar_init_count(uint64_t *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/* An mbarrier of one arrival a phase, ready for every thread of the cluster. */
__device__ __forceinline__ void mbar_init(uint64_t *bar) {
  mbar_init_count(bar, 1u);
  mbar_init_fence();
}
/* This thread's arrival on the barrier's current phase. */
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

/* This thread's arrival on the barrier's current phase, which then also waits for `bytes`
 * of copies (TMA or bulk) to land. */
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}

/* Four 8x8 b16 matrices from shared memory, lane l giving the row address of matrix l / 8.
 * sm80::ldsm_x4's, but volatile with a memory clobber: it reads what a bulk or TMA copy wrote,
 * so it must stay after the mbarrier wait (an asm the compiler may move), where sm80's follows a
 * __syncthreads. */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

/* bytes (a multiple of 16, both addresses 16-byte aligned) from global src to shared dst,
 * counted against the transaction count a thread's mbar_expect_tx announced on the barrier's
 * current phase.  One thread issues it. */
__device__ __forceinline__ void bulk_copy_tx(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
/* bulk_copy_tx with its own arrival: the barrier's current phase completes when the bytes have
 * landed (and its other arrivals have come). */
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
  mbar_expect_tx(bar, bytes);
  bulk_copy_tx(dst, src, bytes, bar);
}

/* bytes (a multiple of 16) of global memory at src (16-byte aligned) asked into L2: one
 * instruction for the whole range, no completion to wait for */
__device__ __forceinline__ void bulk_prefetch_l2(const void *src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}
/* bytes (a multiple of 16, both addresses 16-byte aligned) from shared src to global dst by
 * the bulk engine, in this thread's bulk group; the writes to src before it must be made
 * visible to the engine (fence_proxy_async, then a barrier).  One thread issues it, commits
 * (bulk_commit) and, before src is reused or the block ends, waits (bulk_wait_read). */
__device__ __forceinline__ void bulk_store(void *dst, const void *src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(smem_u32(src)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* Waits until this thread's committed bulk stores have read their shared-memory sources. */
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
/* ... all but the N most recent groups */
template <unsigned N> __device__ __forceinline__ void bulk_wait_read_but() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
/* Waits until this thread's committed bulk stores are complete (written, not only read). */
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

/* ---- tensor maps (TMA; templates from the backend: tma_templates.h) ------------------ */

/* The 2D map at smem_map (a copy of a template, 128-byte aligned) describes `rows` rows of
 * `inner` elements at `base`, row_bytes apart (a multiple of 16, base 16-byte aligned).
 * One thread. */
__device__ __forceinline__ void tmap_set_2d(void *smem_map, const void *base, uint32_t inner, uint32_t rows,
                                            uint64_t row_bytes) {
  const uint32_t m = smem_u32(smem_map);
  asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;\n" ::"r"(m), "l"(base)
               : "memory");
  asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %1;\n" ::"r"(m), "r"(inner)
               : "memory");
  asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 1, %1;\n" ::"r"(m), "r"(rows)
               : "memory");
  asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;\n" ::"r"(m),
               "l"(row_bytes)
               : "memory");
}
/* Copies the map at smem_map to global memory with a release of the tensor-map proxy.  The
 * whole warp executes it. */
__device__ __forceinline__ void tmap_publish(void *gmem_map, const void *smem_map) {
  asm volatile(
      "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], 128;\n" ::"l"(
          (uint64_t)__cvta_generic_to_global(gmem_map)),
      "r"(smem_u32(smem_map))
      : "memory");
}
/* The acquire that lets this thread's TMA copies use the map published at gmem_map. */
__device__ __forceinline__ void tmap_acquire(const void *gmem_map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(gmem_map) : "memory");
}
/* The box of `map` at element (c0 inner, c1 rows) into shared memory at dst (aligned to the
 * map's swizzle span times 8); elements outside the tensor land as zeros.  The barrier's
 * phase completes when the box's bytes (all of them) have landed. */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *map, int c0, int c1, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}

/* The box of `map` at element (c0 inner, c1 rows) from shared memory at src (aligned to the
 * map's swizzle span times 8, in the map's swizzled layout) to global memory, in this thread's
 * bulk group: the box's parts outside the tensor are not written.  The writes to src before it
 * must be made visible to the engine (fence_proxy_async, then a barrier); src may be reused
 * once bulk_wait_read says the group has read it. */
__device__ __forceinline__ void tma_store_2d(const void *map, int c0, int c1, uint32_t src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map), "r"(c0),
               "r"(c1), "r"(src)
               : "memory");
}

/* tma_load_2d into the same offset dst of every CTA of the cluster in cta_mask, completing
 * the barrier at bar's offset in each of them. */
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const void *map, int c0, int c1, uint64_t *bar,
                                                      uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(cta_mask)
      : "memory");
}

/* ---- clusters ------------------------------------------------------------------------ */

/* The SM this thread runs on (%smid: below 1024 on every GPU so far) */
__device__ __forceinline__ unsigned sm_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(r));
  return r;
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
/* Every thread of every CTA of the cluster arrives, then waits for all of them: orders
 * shared-memory writes (barrier inits included) before the other CTAs' accesses. */
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* An arrival on the barrier at bar's offset in CTA `rank` of the cluster.  The release is the
 * CTA's (the default scope): with .release.cluster each arrival waits for a cluster-wide
 * fence, and the ws tiles ran 2x slower (docs/perf-gemm.md, "clusters of two"). */
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
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
