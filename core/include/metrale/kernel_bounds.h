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

/* The q/k planes at the start of the whole-head kernels' workspace (kernels.def
 * delta_rule_prefill_chunked_wh_prep, conv1d_prefill_l2norm_qkh): for chunk j and key head kh, at
 * (j nk + kh) METRALE_WH_QK_BYTES, q's plane then k's, each [64 tokens, 128] IEEE half in 8 x 8 core
 * matrices of 8 rows of 16 bytes (the operands' layout of the scan's wgmma), (tok, d) at the byte
 * METRALE_WH_PLANE_AT(tok, d) of its plane */
#define METRALE_WH_PLANE_BYTES 16384u
#define METRALE_WH_QK_BYTES (2u * METRALE_WH_PLANE_BYTES)
#define METRALE_WH_PLANE_AT(tok, d) \
  ((((tok) / 8u) * 16u + (d) / 8u) * 128u + ((tok) % 8u) * 16u + ((d) % 8u) * 2u)

#endif
