/* A device: one opened backend plus what core tracks about it (kernel handles and the
 * kernel audit).  The layer reaches the hardware only through this and the vtable. */
#ifndef METRALE_DEVICE_H
#define METRALE_DEVICE_H

#include <stddef.h>
#include <stdio.h>

#include "metrale/gpu_backend.h"
#include "metrale/manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- registry ---------------------------------------------------------------------- */

/* What the registry knows of one backend. */
typedef struct metrale_backend_report {
  char name[16];
  int built;     /* compiled into this installation (cpu always) */
  int available; /* a device could be opened */
  int score;
  char reason[512];      /* why not available, or the device name when it is */
  char module_path[512]; /* the module file that was tried, "" for built-in */
  char targets[16384];   /* the module's describe() text, "" if none (HIP's three targets: 8.0 KB) */
} metrale_backend_report;

/* The backends the registry knows: metrale_backend_name(i) for i < metrale_backend_count()
 * (NULL past the end). */
size_t metrale_backend_count(void);
const char *metrale_backend_name(size_t i);

/* Probes one backend by name: loads its module, opens a device, closes it again. */
void metrale_backend_probe(const char *name, metrale_backend_report *out);

/* ---- devices ----------------------------------------------------------------------- */

typedef struct metrale_device metrale_device;

typedef struct metrale_device_options {
  /* "auto", "cpu", "cuda", "hip", "vulkan"; NULL means the METRALE_BACKEND environment
   * variable, or "auto" when that is unset. */
  const char *backend;
  int device_index;
} metrale_device_options;

/* Opens a device.  auto picks the available backend of highest score (cuda > hip >
 * vulkan > cpu).  A named backend that is unavailable is an UNAVAILABLE error with the
 * reason. */
metrale_status metrale_device_open(const metrale_device_options *options,
                                   metrale_device **out_device);
void metrale_device_destroy(metrale_device *dev);
gpu_backend *metrale_device_backend(metrale_device *dev);
/* 1 when the backend records and replays graphs (all four graph entries of the vtable). */
int metrale_device_has_graphs(const metrale_device *dev);

/* Required kernel: NOT_FOUND naming module and name when the backend lacks it. */
metrale_status metrale_kernel(metrale_device *dev, metrale_kernel_id id, gpu_kernel *out_kernel);
/* Optional kernel: the handle, or 0 when absent.  Recorded for the audit either way. */
gpu_kernel metrale_try_kernel(metrale_device *dev, metrale_kernel_id id);

/* Launches a kernel with its manifest block size after checking args against the
 * manifest signature (INVALID_ARGUMENT on mismatch). */
metrale_status metrale_launch(metrale_device *dev, metrale_kernel_id id, gpu_kernel kernel,
                              gpu_dim3 grid, gpu_stream stream, const gpu_arg *args,
                              uint32_t nargs);

/* Launches issued through metrale_launch since the device was opened or the counts were reset,
 * per kernel (empty grids and refused launches are not counted).  A launch recorded into a graph
 * counts once; replaying the graph launches nothing here.  So the counts say which kernels a call
 * really ran: the tests check their paths with them, and `metrale bench` reports them. */
uint64_t metrale_device_launches(const metrale_device *dev, metrale_kernel_id id);
void metrale_device_launches_reset(metrale_device *dev);

typedef enum metrale_lookup {
  METRALE_LOOKUP_NONE = 0,    /* never looked up */
  METRALE_LOOKUP_PRESENT = 1,
  METRALE_LOOKUP_MISSING = 2,
} metrale_lookup;
/* What the last lookup of a kernel found (the kernel audit). */
metrale_lookup metrale_device_lookup(const metrale_device *dev, metrale_kernel_id id);

/* Prints the audit of an opened device: one row per manifest kernel, present/missing,
 * and for a missing optional kernel the fallback. Looks up every kernel. Returns the
 * number of missing REQUIRED kernels. */
int metrale_device_audit(metrale_device *dev, FILE *out);

/* ---- memory helpers (thin wrappers over the vtable) -------------------------------- */

metrale_status metrale_alloc(metrale_device *dev, uint64_t bytes, gpu_ptr *out_ptr);
void metrale_free(metrale_device *dev, gpu_ptr ptr);

#ifdef __cplusplus
}
#endif
#endif
