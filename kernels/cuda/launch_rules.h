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

#endif
