/* Pieces of `metrale bench`. */
#ifndef METRALE_CLI_BENCH_H
#define METRALE_CLI_BENCH_H

#include "cli.h"

/* Median seconds of one call of fn over `samples` samples after `warmup` calls; each
 * sample times `inner` back-to-back calls ended by a device sync, a whole number of `group`s
 * (calls that differ in turn, such as steps going round batch sizes: each sample then holds
 * every kind of call equally often; 1 where the calls are all alike). */
typedef metrale_status (*bench_fn)(void *ctx);
metrale_status bench_time(metrale_device *dev, bench_fn fn, void *ctx, int warmup, int group, int samples,
                          double *out_median, double *out_min);

/* The kernels one call of fn launches (metrale_device_launches around it, then a sync), in
 * manifest order: text "module.name, module.name x2, ..." ("(none)" if none), json
 * {"module.name": count, ...}; both cut short rather than overrun.  A call replayed from a graph
 * launches nothing through metrale_launch: give it a call that launches eagerly. */
metrale_status bench_kernels(metrale_device *dev, bench_fn fn, void *ctx, char *text, size_t text_size, char *json,
                             size_t json_size);

/* Device copy bandwidth: GB/s counting bytes read + written, over a buffer of `bytes`. */
metrale_status bench_copy_bandwidth(metrale_device *dev, uint64_t bytes, double *out_gbps);
/* bf16 GEMM rate of the backend's gemm_bf16 kernel at n x n x n, TFLOP/s. */
metrale_status bench_gemm_rate(metrale_device *dev, uint32_t n, double *out_tflops);

/* The Qwen3-Next-80B-A3B layer shape that bench times (and audit describes). */
void bench_a3b_config(metrale_qwen3_config *c);

/* --config FILE (bench and audit): *layer as given (given != 0), else the first linear-attention
 * layer of c, the config read from path; INVALID_ARGUMENT unless that layer is a linear-attention one. */
metrale_status bench_config_layer(const metrale_qwen3_config *c, const char *path, int given, uint32_t *layer);

#endif
