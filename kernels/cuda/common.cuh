/* Shared by every kernels/cuda/<module>.cu: bf16 storage helpers, block reductions and
 * the compile-time check that each kernel matches its kernels.def row.
 *
 * These sources are also built for AMD through HIP, so nothing here assumes a 32-lane
 * warp, uses inline PTX or cooperative groups.  bf16 is raw uint16 storage converted
 * by the helpers below, bit-exact with core/include/metrale/bf16.h (round to nearest
 * even, NaN kept NaN), so every backend rounds at the same points as the CPU
 * reference. */
#ifndef METRALE_KERNELS_CUDA_COMMON_CUH
#define METRALE_KERNELS_CUDA_COMMON_CUH

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif
#include <stddef.h>
#include <stdint.h>

typedef uint16_t bf16;

/* ---- the manifest at compile time ------------------------------------------------ */

struct mk_row {
  const char *name;
  const char *module;
  unsigned block;
  const char *signature;
};

/* REQUIRED/OPTIONAL, fallback and contract are not needed here. */
constexpr mk_row mk_manifest[] = {
#define METRALE_KERNEL(id, module, block, sig, req, fallback, contract) {#id, #module, block, sig},
#include "metrale/kernels.def"
#undef METRALE_KERNEL
};
constexpr unsigned mk_manifest_size = sizeof mk_manifest / sizeof mk_manifest[0];

constexpr bool mk_streq(const char *a, const char *b) {
  while (*a && *a == *b) {
    a++;
    b++;
  }
  return *a == *b;
}

constexpr int mk_find(const char *name) {
  for (unsigned i = 0; i < mk_manifest_size; i++)
    if (mk_streq(mk_manifest[i].name, name)) return (int)i;
  return -1;
}

/* METRALE_KERNEL_SHARED rows: the dynamic shared memory a kernel is launched with. */
struct mk_shared_row {
  const char *name;
  unsigned bytes;
};
constexpr mk_shared_row mk_shared_rows[] = {
#define METRALE_KERNEL(id, module, block, sig, req, fallback, contract)
#define METRALE_KERNEL_SHARED(id, bytes) {#id, bytes},
#include "metrale/kernels.def"
#undef METRALE_KERNEL_SHARED
#undef METRALE_KERNEL
    {"", 0},
};
constexpr unsigned mk_shared(const char *name) {
  for (unsigned i = 0; i + 1 < sizeof mk_shared_rows / sizeof mk_shared_rows[0]; i++)
    if (mk_streq(mk_shared_rows[i].name, name)) return mk_shared_rows[i].bytes;
  return 0;
}

/* METRALE_KERNEL_CLUSTER rows: the blocks a cluster along grid.x (1 for a kernel not listed). */
struct mk_cluster_row {
  const char *name;
  unsigned x;
};
constexpr mk_cluster_row mk_cluster_rows[] = {
#define METRALE_KERNEL(id, module, block, sig, req, fallback, contract)
#define METRALE_KERNEL_CLUSTER(id, x) {#id, x},
#include "metrale/kernels.def"
#undef METRALE_KERNEL_CLUSTER
#undef METRALE_KERNEL
    {"", 1},
};
constexpr unsigned mk_cluster(const char *name) {
  for (unsigned i = 0; i + 1 < sizeof mk_cluster_rows / sizeof mk_cluster_rows[0]; i++)
    if (mk_streq(mk_cluster_rows[i].name, name)) return mk_cluster_rows[i].x;
  return 1;
}

/* Early start (kernels.def METRALE_KERNEL_EARLY_START): a kernel so marked calls
 * mk_wait_prior() before its first memory access other than prefetch_l2; a kernel calls
 * mk_allow_next() where the kernel after it may start (its blocks then wait in
 * mk_wait_prior).  Both are no-ops where the launch was not programmatic, before sm_90
 * and on HIP. */
__device__ __forceinline__ void mk_wait_prior() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIPCC__)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mk_allow_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIPCC__)
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
}

/* The manifest block size of a kernel: kernels are compiled for exactly that many
 * threads (0 for a name the manifest lacks, which fails the launch-bounds check). */
constexpr unsigned mk_block(const char *name) {
  return mk_find(name) < 0 ? 0u : mk_manifest[mk_find(name)].block;
}

/* Signature kind letter of a kernel parameter type (kernels.def: p u i f q). */
template <typename T> struct mk_kind { static constexpr char value = '?'; };
template <typename T> struct mk_kind<T *> { static constexpr char value = 'p'; };
template <> struct mk_kind<unsigned int> { static constexpr char value = 'u'; };
template <> struct mk_kind<int> { static constexpr char value = 'i'; };
template <> struct mk_kind<float> { static constexpr char value = 'f'; };
template <> struct mk_kind<unsigned long long> { static constexpr char value = 'q'; };

/* True when the kinds string ("pppuuf") equals the kinds of signature "y:p x:p ...". */
constexpr bool mk_kinds_match(const char *kinds, const char *sig) {
  while (*sig) {
    while (*sig == ' ') sig++;
    if (!*sig) break;
    while (*sig && *sig != ':') sig++;
    if (*sig != ':' || *kinds != sig[1]) return false;
    kinds++;
    sig += 2;
  }
  return *kinds == '\0';
}

template <typename F> struct mk_sig;
template <typename... A> struct mk_sig<void(A...)> {
  static constexpr char kinds[sizeof...(A) + 1] = {mk_kind<A>::value..., '\0'};
};

template <typename F> constexpr bool mk_matches(const char *name, const char *module) {
  return mk_find(name) >= 0 && mk_streq(mk_manifest[mk_find(name)].module, module) &&
         mk_kinds_match(mk_sig<F>::kinds, mk_manifest[mk_find(name)].signature);
}

/* A manifest kernel: C linkage, the manifest's name and block size. */
#define MK_KERNEL(name) extern "C" __global__ void __launch_bounds__(mk_block(#name)) name

/* Put after each kernel: its parameter kinds, order and module must be the manifest's. */
#define MK_CHECK(name, module)                                         \
  static_assert(mk_matches<decltype(name)>(#name, #module),            \
                #name ": parameters or module differ from kernels.def")

/* ---- bf16 storage ---------------------------------------------------------------- */

__device__ __forceinline__ float bf16_to_f32(bf16 h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ bf16 f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x0040u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bf16)(u >> 16);
}

/* IEEE half bits of f, rounded to nearest even (past 65504 to infinity, subnormals kept,
 * NaN kept NaN): integer steps bit-exact with metrale_f32_to_f16 (core/include/metrale/bf16.h). */
__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) {
  const uint32_t u = __float_as_uint(f), a = u & 0x7fffffffu;
  const uint32_t sign = (u >> 16) & 0x8000u;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
  }
  if (a < 0x33000000u) return (uint16_t)sign;
  const uint32_t shift = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u;
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

/* f32_to_f16_bits by one cvt on NVIDIA (the same bits for every value but NaN, which keeps the
 * integer steps' payload); for kernels where the integer steps are a cost (rmsnorm_f16: 3 us of
 * its 18 at 4096 rows of 2048 on the H200). */
__device__ __forceinline__ uint16_t f32_to_f16_rn(float f) {
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  if (f != f) return f32_to_f16_bits(f);
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  return f32_to_f16_bits(f);
#endif
}

/* One IEEE half (the low 16 bits of h) as f32 in integer steps, exactly (infinities and NaN kept;
 * bit for bit metrale_f16_to_f32 for all 65536 values, checked on the host 2026-12-03). */
__device__ __forceinline__ float f16_bits_to_f32(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, a = h & 0x7fffu;
  float f;
  if (a >= 0x7c00u)
    f = __uint_as_float(0x7f800000u | ((a & 0x3ffu) << 13)); /* infinity, NaN with its payload */
  else if (a >= 0x0400u)
    f = __uint_as_float((a << 13) + 0x38000000u); /* normal: the exponent's bias 15 -> 127 */
  else
    f = (float)a * 5.9604644775390625e-8f; /* subnormal: a * 2^-24 */
  return __uint_as_float(__float_as_uint(f) | sign);
}
/* Two IEEE halves (element 0 the low half of w) as f32, exactly: two cvt on NVIDIA, elsewhere
 * f16_bits_to_f32 (HIP). */
__device__ __forceinline__ float2 f16x2_to_f32(uint32_t w) {
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  float lo, hi;
  asm("{\n.reg .f16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}"
      : "=f"(lo), "=f"(hi)
      : "r"(w));
  return make_float2(lo, hi);
#else
  return make_float2(f16_bits_to_f32(w & 0xffffu), f16_bits_to_f32(w >> 16));
#endif
}

/* The value a bf16 store and reload would give. */
__device__ __forceinline__ float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

/* Two f32 as bf16 in one word (lo in the low half), rounded to nearest even: on NVIDIA one cvt a
 * pair (F2FP), where f32_to_bf16 takes ~8 integer steps and a branch a value.  The same bits
 * for every finite value and infinity; a NaN stays NaN (its payload may change).  For kernels
 * bound by their instructions (gated_rmsnorm_rows: 57 a value on the H200, 14 % of them LOP3,
 * 8 % branches; docs/perf-prefill.md part 15), for phase 1's O stores and for the GEMM epilogues'
 * bf16 pairs (moe_down_sorted_ws_bf16: 445-448 -> 438-441 us at a 4096-token layer prefill).  (A
 * single cvt.rn.bf16.f32 a value with f32_to_bf16 kept for NaN made add_rmsnorm slower, 24.8 ->
 * 38.2 us at 4096 rows: not used; perf-prefill.md, the input norm's section.) */
__device__ __forceinline__ uint32_t bf16x2_rn(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__HIPCC__)
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return (uint32_t)f32_to_bf16(lo) | ((uint32_t)f32_to_bf16(hi) << 16);
#endif
}

/* The two bf16 halves of a 32-bit word (little endian: element 0 is the low half). */
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

/* 8 bf16 from a 16-byte vector load. */
__device__ __forceinline__ void unpack8(uint4 v, float f[8]) {
  f[0] = bf16_lo(v.x); f[1] = bf16_hi(v.x);
  f[2] = bf16_lo(v.y); f[3] = bf16_hi(v.y);
  f[4] = bf16_lo(v.z); f[5] = bf16_hi(v.z);
  f[6] = bf16_lo(v.w); f[7] = bf16_hi(v.w);
}

/* acc + w . x, w 8 bf16 from a 16-byte load, x 8 floats, the products summed in element order. */
__device__ __forceinline__ float dot8_add(uint4 w, const float x[8], float acc) {
  float wf[8];
  unpack8(w, wf);
#pragma unroll
  for (unsigned e = 0; e < 8; e++) acc = fmaf(wf[e], x[e], acc);
  return acc;
}

/* 16-byte loads need 16-byte aligned addresses: base pointers and row strides. */
__device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* 16 bytes of a weight stream, read once: on NVIDIA it bypasses L1 (L1::no_allocate), so
 * the streaming weights do not evict the activation rows the threads of a block share
 * there (H200: out_proj gemv at M = 1 8.2 -> 7.4 us); elsewhere a plain load. */
__device__ __forceinline__ uint4 load_stream16(const bf16 *p) {
#if defined(__CUDA_ARCH__) && !defined(__HIPCC__)
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
#else
  return *reinterpret_cast<const uint4 *>(p);
#endif
}

/* ---- scalar functions, as the CPU reference writes them --------------------------- */

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
/* 2^x by one MUFU.EX2, results below 2^-126 flushed to zero (HIP: exp2f, which keeps them) */
__device__ __forceinline__ float ex2_ftz(float x) {
#if defined(__HIPCC__)
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}
/* silu by the fast exp and division (MUFU ex2 and rcp: a few ulp from silu_f; x below about
 * -87 gives 0): for kernels that make one a value and are bound by issue slots.  The exp is
 * __expf's (ex2 of x log2(e), the product rounded the same way) without its range fix for
 * results below 2^-126: those flush to zero here, and 1 + e is 1 either way, so on CUDA the
 * values are __expf's to the bit in 3 fewer instructions (docs/perf-prefill.md, part 16). */
__device__ __forceinline__ float silu_fast(float x) {
  return __fdividef(x, 1.0f + ex2_ftz(-x * 1.44269504088896341f));
}
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* ---- block reductions ------------------------------------------------------------ */

/* Sum of v over a block of BLOCK threads (a power of two); every thread gets the total.
 * red is shared scratch of BLOCK floats.  A shared-memory tree rather than warp
 * shuffles, so it holds for any subgroup width. */
template <unsigned BLOCK> __device__ __forceinline__ float block_sum(float v, float *red) {
  static_assert((BLOCK & (BLOCK - 1)) == 0, "block_sum needs a power-of-two block");
  const unsigned tid = threadIdx.x;
  red[tid] = v;
  __syncthreads();
#pragma unroll
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    __syncthreads();
  }
  float total = red[0];
  __syncthreads(); /* red may be reused right away */
  return total;
}

#endif
