/* Pieces of `metrale bench`. */
#ifndef METRALE_CLI_BENCH_H
#define METRALE_CLI_BENCH_H

#include "cli.h"

/* Median seconds of one call of fn over `samples` samples after `warmup` calls; each
 * sample times `inner` back-to-back calls ended by a device sync. */
typedef metrale_status (*bench_fn)(void *ctx);
metrale_status bench_time(metrale_device *dev, bench_fn fn, void *ctx, int warmup, int samples,
                          double *out_median, double *out_min);

/* Device copy bandwidth: GB/s counting bytes read + written, over a buffer of `bytes`. */
metrale_status bench_copy_bandwidth(metrale_device *dev, uint64_t bytes, double *out_gbps);
/* bf16 GEMM rate of the backend's gemm_bf16 kernel at n x n x n, TFLOP/s. */
metrale_status bench_gemm_rate(metrale_device *dev, uint32_t n, double *out_tflops);

/* The Qwen3-Next-80B-A3B layer shape that bench times (and audit describes). */
void bench_a3b_config(metrale_qwen3_config *c);

#endif
