/* The plugin entry point of libmetrale-backend-cuda.so and describe(). */
#include <stdio.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_images.h"

/* Appends to buf; returns 0 once the text no longer fits. */
static int append(char *buf, size_t cap, size_t *used, const char *text) {
  size_t n = strlen(text);
  if (*used + n + 1 > cap) return 0;
  memcpy(buf + *used, text, n + 1);
  *used += n;
  return 1;
}

/* One "target: k1 k2 ..." line per compiled target, the kernels taken from the lists
 * read off each embedded image at build time. */
static metrale_status cuda_describe(char *buffer, size_t capacity) {
  if (!buffer || capacity == 0) return METRALE_ERROR(INVALID_ARGUMENT, "cuda describe: no buffer");
  buffer[0] = '\0';
  if (cuda_image_count == 0) {
    snprintf(buffer, capacity, "no kernels were built into this module");
    return METRALE_OK;
  }
  size_t used = 0;
  int ok = 1;
  const cuda_image *first = cuda_images[0];
  for (size_t t = 0; t < first->ntargets && ok; t++) {
    const char *target = first->targets[t].target;
    ok = append(buffer, capacity, &used, target) && append(buffer, capacity, &used, ":");
    for (unsigned m = 0; m < cuda_image_count && ok; m++) {
      const cuda_image *img = cuda_images[m];
      for (size_t u = 0; u < img->ntargets && ok; u++) {
        if (strcmp(img->targets[u].target, target) != 0 || !img->targets[u].kernels[0]) continue;
        ok = append(buffer, capacity, &used, " ") &&
             append(buffer, capacity, &used, img->targets[u].kernels);
      }
    }
    if (ok) ok = append(buffer, capacity, &used, "\n");
  }
  if (!ok) return METRALE_ERROR(INVALID_ARGUMENT, "cuda describe: %zu bytes are not enough", capacity);
  return METRALE_OK;
}

static const gpu_backend_module cuda_plugin = {
    .api_version = METRALE_BACKEND_API_VERSION,
    .name = "cuda",
    .score = 400,
    .create = cuda_create,
    .describe = cuda_describe,
};

__attribute__((visibility("default"))) const gpu_backend_module *metrale_backend_entry(void) {
  return &cuda_plugin;
}
