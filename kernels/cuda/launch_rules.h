/* Host-side shape rules of the kernels/cuda sources, shared by the two backends that run
 * them (cuda, and hip through the compat header).
 *
 * A kernel cannot return an error, so the rules the CPU reference reports as
 * INVALID_ARGUMENT, and the limits of these kernels, are checked before a launch; the
 * kernels also refuse such shapes quietly, so a launch that skipped this check still
 * cannot divide by zero or overrun.  Arguments are found by their manifest names. */
#ifndef METRALE_KERNELS_CUDA_LAUNCH_RULES_H
#define METRALE_KERNELS_CUDA_LAUNCH_RULES_H

#include "metrale/manifest.h"

/* INVALID_ARGUMENT naming the kernel and the rule when a launch breaks one. */
metrale_status cuda_kernels_check_launch(const metrale_kernel_info *info, const gpu_arg *args);

/* The kernels are compiled for (and index by) exactly the manifest's block: INVALID_ARGUMENT
 * for any other. */
metrale_status cuda_kernels_check_block(const metrale_kernel_info *info, gpu_dim3 block);

/* The kernelParams of a launch (cuLaunchKernel, hipModuleLaunchKernel): one pointer per
 * argument, at a value of the kernel's parameter type. */
typedef struct cuda_kernel_params {
  union {
    uint64_t u64;
    uint32_t u32;
    int32_t i32;
    float f32;
  } values[METRALE_MAX_KERNEL_ARGS];
  void *ptrs[METRALE_MAX_KERNEL_ARGS];
} cuda_kernel_params;

/* Fills p from args (checked against the signature already); returns the pointer array to
 * pass, NULL when there are no arguments.  p must outlive the launch call. */
void **cuda_kernels_params(cuda_kernel_params *p, const gpu_arg *args, uint32_t nargs);

#endif
