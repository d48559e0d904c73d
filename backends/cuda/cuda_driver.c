/* Loading libcuda.so.1 and converting CUresult codes at the boundary. */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CUDA_LIBRARY "libcuda.so.1"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static cuda_driver driver;
static int load_failed;
static char load_error[512];

static void load(void) {
  /* The library stays open for the life of the process: contexts and modules the
   * backends hold point into it. */
  void *lib = dlopen(CUDA_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    snprintf(load_error, sizeof load_error, "%s not found: %s (is the NVIDIA driver installed?)",
             CUDA_LIBRARY, why ? why : "unknown dlopen error");
    load_failed = 1;
    return;
  }
#define CUDA_DRIVER_BIND(field, symbol, params)                                          \
  do {                                                                                   \
    void *sym = dlsym(lib, symbol);                                                      \
    if (!sym) {                                                                          \
      snprintf(load_error, sizeof load_error, "%s lacks %s: the NVIDIA driver is too old", \
               CUDA_LIBRARY, symbol);                                                    \
      load_failed = 1;                                                                   \
      return;                                                                            \
    }                                                                                    \
    driver.field = (cuda_result(*) params)(uintptr_t)sym;                                \
  } while (0);
  CUDA_DRIVER_FUNCTIONS(CUDA_DRIVER_BIND)
#undef CUDA_DRIVER_BIND

  cuda_result r = driver.Init(0);
  if (r != CUDA_DRV_SUCCESS) {
    char text[256];
    cuda_result_text(&driver, r, text, sizeof text);
    snprintf(load_error, sizeof load_error, "cuInit failed: %s", text);
    load_failed = 1;
    return;
  }
  if (driver.DriverGetVersion(&driver.version) != CUDA_DRV_SUCCESS) driver.version = 0;
}

metrale_status cuda_driver_get(const cuda_driver **out_driver) {
  pthread_once(&load_once, load);
  if (load_failed) return METRALE_ERROR(UNAVAILABLE, "%s", load_error);
  *out_driver = &driver;
  return METRALE_OK;
}

void cuda_result_text(const cuda_driver *drv, cuda_result r, char *buf, size_t cap) {
  const char *name = NULL, *text = NULL;
  if (drv && drv->GetErrorName && drv->GetErrorName(r, &name) != CUDA_DRV_SUCCESS) name = NULL;
  if (drv && drv->GetErrorString && drv->GetErrorString(r, &text) != CUDA_DRV_SUCCESS) text = NULL;
  if (name)
    snprintf(buf, cap, "%s (%s)", name, text ? text : "no description");
  else
    snprintf(buf, cap, "CUresult %d", r);
}

static metrale_code code_of(cuda_result r) {
  switch (r) {
    case CUDA_DRV_ERROR_OUT_OF_MEMORY: return METRALE_CODE_OUT_OF_MEMORY;
    case CUDA_DRV_ERROR_NOT_FOUND: return METRALE_CODE_NOT_FOUND;
    case CUDA_DRV_ERROR_INVALID_VALUE: return METRALE_CODE_INVALID_ARGUMENT;
    case CUDA_DRV_ERROR_NOT_INITIALIZED:
    case CUDA_DRV_ERROR_STUB_LIBRARY:
    case CUDA_DRV_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_DRV_ERROR_NO_DEVICE:
    case CUDA_DRV_ERROR_INVALID_DEVICE:
    case CUDA_DRV_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_DRV_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_DRV_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_DRV_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return METRALE_CODE_UNAVAILABLE;
    default: return METRALE_CODE_INTERNAL;
  }
}

metrale_status cuda_error(const cuda_driver *drv, cuda_result r, const char *file, int line,
                          const char *what_fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, what_fmt);
  vsnprintf(what, sizeof what, what_fmt, ap);
  va_end(ap);
  char text[256];
  cuda_result_text(drv, r, text, sizeof text);
  return metrale_status_make(code_of(r), file, line, "%s: %s", what, text);
}
