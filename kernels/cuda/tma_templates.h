/* Tensor-map templates for the sm_90a kernels' TMA copies, shared by the kernels and the CUDA
 * backend (plain C).
 *
 * A tensor map (CUtensorMap, 128 bytes) is made by the driver (cuTensorMapEncodeTiled), and
 * launch arguments carry only pointers and integers.  So a module whose kernels copy by TMA
 * defines, in its sm_90a image,
 *
 *   extern "C" __device__ unsigned char metrale_tma_templates[METRALE_TMA_COUNT][METRALE_TMA_BYTES];
 *
 * and the backend, when it loads the module, encodes into row i a valid 2D tiled map of the
 * geometry row i of METRALE_TMA_TEMPLATES gives (element size, box, swizzle; any address and
 * extent).  A kernel copies the template into shared memory, replaces its address, extents
 * and row stride with its operand's (tensormap.replace), publishes it to global memory and
 * acquires it (sm90a.cuh).  The build records which images define the symbol
 * (cmake/MetraleEmbedCuda.cmake); the backend writes the templates into those and leaves the
 * others alone, and a module whose templates cannot be written fails to load.
 *
 * X(name, element bytes, box inner extent in elements, box rows, swizzle span in bytes) */
#ifndef METRALE_KERNELS_CUDA_TMA_TEMPLATES_H
#define METRALE_KERNELS_CUDA_TMA_TEMPLATES_H

#define METRALE_TMA_TEMPLATES(X)                                                   \
  X(BF16_K32_R128, 2, 32, 128, 64)  /* gemm_ws.cuh: a bf16 x tile, 128 rows of 64 B */ \
  X(BF16_K32_R256, 2, 32, 256, 64)  /* gemm_ws.cuh: the w tile, 256 rows of 64 B */    \
  X(BF16_K32_R192, 2, 32, 192, 64)  /* gemm_ws.cuh: the 192-column tile's w, 192 rows */ \
  X(F32_K32_R128, 4, 32, 128, 128)  /* gemm_ws.cuh: an f32 x tile, 128 rows of 128 B */ \
  X(BF16_K32_R64, 2, 32, 64, 64)    /* gemm_ws.cuh: a 64-row tile's bf16 x */            \
  X(F32_K32_R64, 4, 32, 64, 128)    /* gemm_ws.cuh: a 64-row tile's f32 x */            \
  X(F32_K32_R16, 4, 32, 16, 128)    /* gemm_ws.cuh: a warp's f32 output box (cols3) */  \
  X(H16_K32_R16, 2, 32, 16, 64)     /* gemm_ws.cuh: a warp's half output box (cols3q's y0) */ \
  X(H16_K64_R64, 2, 64, 64, 128)    /* gdn_chunked_wh.cuh: 64 tokens of v, half a head's columns */

enum {
#define METRALE_TMA_ENUM(name, elem_bytes, box_k, box_rows, swizzle) METRALE_TMA_##name,
  METRALE_TMA_TEMPLATES(METRALE_TMA_ENUM)
#undef METRALE_TMA_ENUM
  METRALE_TMA_COUNT
};

#define METRALE_TMA_SYMBOL "metrale_tma_templates"
#define METRALE_TMA_BYTES 128

#endif
