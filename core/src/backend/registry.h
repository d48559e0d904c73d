/* Registry internals shared by device.c and the unit tests. */
#ifndef METRALE_REGISTRY_H
#define METRALE_REGISTRY_H

#include "metrale/device.h"
#include "metrale/gpu_backend.h"

/* dlopens one module file and checks its entry point and API version. */
metrale_status metrale_backend_module_load(const char *path, const gpu_backend_module **out_module);
/* The module of a known backend (built in, or searched and loaded once). */
metrale_status metrale_backend_module_get(const char *name, const gpu_backend_module **out_module,
                                          const char **out_path);
int metrale_backend_built(const char *name);
/* The environment's say over an opened backend's caps: METRALE_NO_FP16 (set, not "0") clears
 * GPU_CAP_F16_TENSOR, so that the layer keeps its f32-class paths. */
void metrale_caps_apply_env(gpu_caps *caps);

#endif
