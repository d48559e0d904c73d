/* The one compat header through which the kernels/cuda sources build for AMD GPUs.
 *
 * cmake/MetraleHip.cmake compiles every kernels/cuda/<module>.cu with
 *   hipcc -x hip -include kernels/hip/cuda_compat.h --offload-arch=<gfx...>
 * so the CUDA sources stay the only kernel sources (no fork).  HIP already spells most
 * CUDA device names the same way (threadIdx, __syncthreads, __launch_bounds__,
 * __float_as_uint, make_uint4, __ldg, ...); this header adds the rest the shared sources
 * may use and marks the build with METRALE_HIP, so a source can guard an NVIDIA-only
 * path with `#if !defined(METRALE_HIP)` (gemm.cu's wmma path checks __HIPCC__, the same).
 *
 * Wavefronts: CDNA (gfx9) runs 64 lanes, RDNA (gfx10+) 32.  Shared code must not assume
 * 32 lanes: use warpSize, or block-wide shared-memory reductions (common.cuh).  Mapped
 * here are only names whose meaning does not change with the width; __ballot_sync and
 * __activemask are deliberately NOT mapped: their CUDA result is a 32-bit mask and AMD's
 * is 64-bit, so a kernel using them must be reviewed, and fails to compile until it is.
 *
 * Known difference: HIP before 6 defines __noinline__ as nothing, and hipcc inlines every
 * device function on AMD anyway, so a path that gdn.cu keeps out of line (for its own
 * register allocation on NVIDIA) is inlined here. */
#ifndef METRALE_KERNELS_HIP_CUDA_COMPAT_H
#define METRALE_KERNELS_HIP_CUDA_COMPAT_H

#if !defined(__HIPCC__)
#error "kernels/hip/cuda_compat.h is for hipcc builds of kernels/cuda (-x hip)"
#endif

#include <hip/hip_runtime.h>

#define METRALE_HIP 1

/* The kernels must never take a CUDA-architecture path (wmma, inline PTX). */
#if defined(__CUDA_ARCH__)
#error "__CUDA_ARCH__ is defined in a HIP build: an NVIDIA path would be compiled for AMD"
#endif

/* Warp-synchronous shuffles: HIP before 6.2 has only the unsynchronised forms.  AMD
 * wavefronts execute in lockstep, so the CUDA member mask has nothing to wait for and
 * is dropped (still evaluated, for its side effects).  `width` defaults to the hardware
 * width, as in CUDA; a shuffle reduction written for 32 lanes (offsets 16..1) reduces
 * each half of a 64-lane wavefront separately. */
#if !defined(HIP_ENABLE_WARP_SYNC_BUILTINS)
#define __shfl_sync(mask, var, ...) ((void)(mask), __shfl((var), __VA_ARGS__))
#define __shfl_up_sync(mask, var, ...) ((void)(mask), __shfl_up((var), __VA_ARGS__))
#define __shfl_down_sync(mask, var, ...) ((void)(mask), __shfl_down((var), __VA_ARGS__))
#define __shfl_xor_sync(mask, var, ...) ((void)(mask), __shfl_xor((var), __VA_ARGS__))
/* A wavefront needs no reconvergence; the barrier keeps the compiler from moving
 * memory accesses across the point, which is what code relying on __syncwarp needs. */
#define __syncwarp(...) __builtin_amdgcn_wave_barrier()
/* Whether the predicate holds on any lane of the wavefront.  Its scope is the hardware
 * width (32 or 64 lanes), so use it only to skip work that no lane of the group needs,
 * which is right at either width (conv.cu's value-only warps). */
#define __any_sync(mask, pred) ((void)(mask), __any(pred))
#endif

#endif
