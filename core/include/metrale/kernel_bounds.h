/* Bounds on kernel arguments that kernels.def states in words and that more than one side checks:
 * the ops choosing them, each backend's launch rules, and the kernels themselves.  No includes, so
 * that CUDA and HIP sources take it as C does. */
#ifndef METRALE_KERNEL_BOUNDS_H
#define METRALE_KERNEL_BOUNDS_H

/* delta_rule_prefill_chunked_wh_seg: nseg segments a sequence, segment 0 w0/16 times as long as
 * each other one */
#define METRALE_WH_NSEG_MIN 3
#define METRALE_WH_NSEG_MAX 8
#define METRALE_WH_W0_MIN 1
#define METRALE_WH_W0_MAX 64
#define METRALE_WH_W0_EQUAL 16

#endif
