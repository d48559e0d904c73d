/* The plugin entry point of libmetrale-backend-hip.so and describe(). */
#include <stdio.h>
#include <string.h>

#include "hip_backend.h"
#include "hip_images.h"

/* Appends to buf; returns 0 once the text no longer fits. */
static int append(char *buf, size_t cap, size_t *used, const char *text) {
  size_t n = strlen(text);
  if (*used + n + 1 > cap) return 0;
  memcpy(buf + *used, text, n + 1);
  *used += n;
  return 1;
}

static int listed(const char *list, const char *name) {
  size_t len = strlen(name);
  for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
    if ((p == list || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) return 1;
  return 0;
}

/* 1 when the code object of `target` in the module of `info` holds the kernel. */
static int carried(const metrale_kernel_info *info, const char *target) {
  for (unsigned m = 0; m < hip_image_count; m++) {
    const hip_image *img = hip_images[m];
    if (strcmp(img->module, info->module) != 0) continue;
    for (size_t t = 0; t < img->ntargets; t++)
      if (strcmp(img->targets[t].target, target) == 0) return listed(img->targets[t].kernels, info->name);
  }
  return 0;
}

/* Appends " k1 k2 ..." for the manifest kernels that `target` has (want = 1) or lacks
 * (want = 0), of one requirement (0: any); *count gets how many. */
static int kernel_list(char *buf, size_t cap, size_t *used, const char *target, int want,
                       int requirement, int *count) {
  *count = 0;
  for (int id = 0; id < METRALE_K_COUNT; id++) {
    const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)id);
    if (!info || carried(info, target) != want) continue;
    if (requirement && (int)info->requirement != requirement) continue;
    if (!append(buf, cap, used, " ") || !append(buf, cap, used, info->name)) return 0;
    (*count)++;
  }
  return 1;
}

/* "gfx90a falls back to gemm.gemm_bf16 for: gemm_bf16_t128", one line per optional
 * kernel the target lacks.  The text before the colon must hold none: a ':' in a
 * fallback is written as ';'. */
static int fallback_lines(char *buf, size_t cap, size_t *used, const char *target) {
  for (int id = 0; id < METRALE_K_COUNT; id++) {
    const metrale_kernel_info *info = metrale_kernel_info_get((metrale_kernel_id)id);
    if (!info || info->requirement != METRALE_OPTIONAL || carried(info, target)) continue;
    size_t start = *used;
    if (!append(buf, cap, used, target) || !append(buf, cap, used, " falls back to ") ||
        !append(buf, cap, used, info->fallback[0] ? info->fallback : "nothing"))
      return 0;
    for (size_t i = start; i < *used; i++)
      if (buf[i] == ':' || buf[i] == '\n') buf[i] = ';';
    if (!append(buf, cap, used, " for: ") || !append(buf, cap, used, info->name) ||
        !append(buf, cap, used, "\n"))
      return 0;
  }
  return 1;
}

/* Per compiled target, "target: k1 k2 ..." with the kernels its code objects hold (the
 * lists read off each code object at build time); then, for what it lacks, the fallback
 * the layer takes for each optional kernel, and the required ones without which it
 * cannot run on that target. */
static metrale_status hip_describe(char *buffer, size_t capacity) {
  if (!buffer || capacity == 0) return METRALE_ERROR(INVALID_ARGUMENT, "hip describe: no buffer");
  buffer[0] = '\0';
  if (hip_target_count == 0) {
    snprintf(buffer, capacity, "no code objects were built into this module");
    return METRALE_OK;
  }
  size_t used = 0;
  int ok = 1, n;
  for (unsigned t = 0; t < hip_target_count && ok; t++) {
    const char *target = hip_targets[t];
    ok = append(buffer, capacity, &used, target) && append(buffer, capacity, &used, ":") &&
         kernel_list(buffer, capacity, &used, target, 1, 0, &n) &&
         append(buffer, capacity, &used, "\n") && fallback_lines(buffer, capacity, &used, target);
    if (!ok) break;
    size_t mark = used;
    ok = append(buffer, capacity, &used, target) &&
         append(buffer, capacity, &used, " lacks REQUIRED kernels, the layer cannot run:") &&
         kernel_list(buffer, capacity, &used, target, 0, METRALE_REQUIRED, &n) &&
         append(buffer, capacity, &used, "\n");
    if (ok && n == 0) { /* nothing required is absent: no line */
      used = mark;
      buffer[used] = '\0';
    }
  }
  if (!ok) {
    buffer[0] = '\0';
    return METRALE_ERROR(INVALID_ARGUMENT, "hip describe: %zu bytes are not enough", capacity);
  }
  return METRALE_OK;
}

static const gpu_backend_module hip_plugin = {
    .api_version = METRALE_BACKEND_API_VERSION,
    .name = "hip",
    .score = 300,
    .create = hip_create,
    .describe = hip_describe,
};

__attribute__((visibility("default"))) const gpu_backend_module *metrale_backend_entry(void) {
  return &hip_plugin;
}
