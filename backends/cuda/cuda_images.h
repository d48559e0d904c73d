/* The kernel images embedded at build time (cmake/MetraleCuda.cmake): one fatbin per
 * kernels.def module, with the manifest kernels each compiled target holds. */
#ifndef METRALE_CUDA_IMAGES_H
#define METRALE_CUDA_IMAGES_H

#include <stddef.h>

typedef struct cuda_image_target {
  const char *target;  /* "sm_80", "sm_90a", "compute_90" */
  const char *kernels; /* space-separated manifest names found in that image */
  int tma;             /* 1: the image defines the TMA templates (kernels/cuda/tma_templates.h) */
} cuda_image_target;

typedef struct cuda_image {
  const char *module; /* the kernels.def module */
  const unsigned char *fatbin;
  size_t size;
  const cuda_image_target *targets;
  size_t ntargets;
} cuda_image;

/* NULL-terminated, cuda_image_count entries. */
extern const cuda_image *const cuda_images[];
extern const unsigned cuda_image_count;

#endif
