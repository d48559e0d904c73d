/* Loading the HIP runtime (libamdhip64) and converting hipError_t at the boundary. */
#include "hip_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Newest first: each ROCm major release ships libamdhip64.so.<major>; the unversioned
 * name exists where the development package is installed. */
static const char *const libraries[] = {
    "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so",
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static hip_api api;
static int load_failed;
static char load_error[768];

static void load(void) {
  /* The library stays open for the life of the process: modules and streams the
   * backends hold point into it. */
  void *lib = NULL;
  const char *why = NULL;
  for (size_t i = 0; i < sizeof libraries / sizeof libraries[0] && !lib; i++) {
    lib = dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      snprintf(api.library, sizeof api.library, "%s", libraries[i]);
    } else {
      why = dlerror();
    }
  }
  if (!lib) {
    snprintf(load_error, sizeof load_error,
             "the HIP runtime is not installed: none of libamdhip64.so.{7,6,5} could be opened "
             "(last error: %s); install ROCm (Debian: libamdhip64-5)",
             why ? why : "unknown dlopen error");
    load_failed = 1;
    return;
  }
#define HIP_API_BIND(field, symbol, ret, params)                                           \
  do {                                                                                     \
    void *sym = dlsym(lib, symbol);                                                        \
    if (!sym) {                                                                            \
      snprintf(load_error, sizeof load_error, "%s lacks %s: the HIP runtime is too old",   \
               api.library, symbol);                                                       \
      load_failed = 1;                                                                     \
      return;                                                                              \
    }                                                                                      \
    api.field = (ret(*) params)(uintptr_t)sym;                                             \
  } while (0);
  HIP_API_FUNCTIONS(HIP_API_BIND)
#undef HIP_API_BIND

  void *props = dlsym(lib, "hipGetDevicePropertiesR0600");
  api.props_arch_offset = HIP_API_PROPS_R0600_ARCH_OFFSET;
  if (!props) {
    props = dlsym(lib, "hipGetDeviceProperties");
    api.props_arch_offset = HIP_API_PROPS_R0000_ARCH_OFFSET;
  }
  if (!props) {
    snprintf(load_error, sizeof load_error, "%s lacks hipGetDeviceProperties", api.library);
    load_failed = 1;
    return;
  }
  api.GetDeviceProperties = (hip_error(*)(void *, int))(uintptr_t)props;
  if (api.RuntimeGetVersion(&api.runtime_version) != HIP_API_SUCCESS) api.runtime_version = 0;
}

metrale_status hip_api_get(const hip_api **out_api) {
  pthread_once(&load_once, load);
  if (load_failed) return METRALE_ERROR(UNAVAILABLE, "%s", load_error);
  *out_api = &api;
  return METRALE_OK;
}

void hip_error_text(const hip_api *a, hip_error e, char *buf, size_t cap) {
  const char *name = a && a->GetErrorName ? a->GetErrorName(e) : NULL;
  const char *text = a && a->GetErrorString ? a->GetErrorString(e) : NULL;
  if (name && text && strcmp(name, text) != 0) /* HIP 5 gives the name for both */
    snprintf(buf, cap, "%s (%s)", name, text);
  else if (name)
    snprintf(buf, cap, "%s", name);
  else
    snprintf(buf, cap, "hipError_t %d", e);
}

static metrale_code code_of(hip_error e) {
  switch (e) {
    case HIP_API_ERROR_OUT_OF_MEMORY: return METRALE_CODE_OUT_OF_MEMORY;
    case HIP_API_ERROR_NOT_FOUND: return METRALE_CODE_NOT_FOUND;
    case HIP_API_ERROR_INVALID_VALUE:
    case HIP_API_ERROR_LAUNCH_OUT_OF_RESOURCES: return METRALE_CODE_INVALID_ARGUMENT;
    case HIP_API_ERROR_NOT_INITIALIZED:
    case HIP_API_ERROR_INSUFFICIENT_DRIVER:
    case HIP_API_ERROR_NO_DEVICE:
    case HIP_API_ERROR_INVALID_DEVICE:
    case HIP_API_ERROR_INVALID_IMAGE:
    case HIP_API_ERROR_NO_BINARY_FOR_GPU:
    case HIP_API_ERROR_INVALID_KERNEL_FILE:
    case HIP_API_ERROR_SHARED_OBJECT_INIT_FAILED: return METRALE_CODE_UNAVAILABLE;
    default: return METRALE_CODE_INTERNAL;
  }
}

metrale_status hip_error_status(const hip_api *a, hip_error e, const char *file, int line,
                                const char *what_fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, what_fmt);
  vsnprintf(what, sizeof what, what_fmt, ap);
  va_end(ap);
  char text[256];
  hip_error_text(a, e, text, sizeof text);
  return metrale_status_make(code_of(e), file, line, "%s: %s", what, text);
}
