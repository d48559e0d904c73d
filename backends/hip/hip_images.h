/* The code objects embedded at build time (cmake/MetraleHip.cmake): one clang offload
 * bundle per kernels.def module, holding a code object per AMD target, with the manifest
 * kernels each target's code object holds. */
#ifndef METRALE_HIP_IMAGES_H
#define METRALE_HIP_IMAGES_H

#include <stddef.h>

typedef struct hip_image_target {
  const char *target;  /* "gfx90a" */
  const char *kernels; /* space-separated manifest names found in that code object */
} hip_image_target;

typedef struct hip_image {
  const char *module; /* the kernels.def module */
  const unsigned char *bundle; /* what hipModuleLoadData is given */
  size_t size;
  const hip_image_target *targets;
  size_t ntargets;
} hip_image;

/* A kernels.def module the HIP build leaves out, and why. */
typedef struct hip_excluded_module {
  const char *module;
  const char *reason;
} hip_excluded_module;

/* NULL-terminated, hip_image_count entries. */
extern const hip_image *const hip_images[];
extern const unsigned hip_image_count;
/* The targets every image was built for, in build order; NULL-terminated. */
extern const char *const hip_targets[];
extern const unsigned hip_target_count;
/* {NULL, NULL}-terminated, hip_excluded_module_count entries. */
extern const hip_excluded_module hip_excluded_modules[];
extern const unsigned hip_excluded_module_count;

#endif
