/* See launch_rules.h.  Arguments are found by their manifest names, not positions. */
#include <string.h>

#include "launch_rules.h"

static int has(const metrale_kernel_info *info, const char *name) {
  return metrale_kernel_arg_index(info, name) >= 0;
}

/* The value of a u32 argument; 0 when the kernel has no such argument. */
static uint32_t u32_arg(const metrale_kernel_info *info, const gpu_arg *args, const char *name) {
  int i = metrale_kernel_arg_index(info, name);
  return i < 0 ? 0u : args[i].v.u32;
}

/* The general delta rule path spreads a state column over at most one block; the fused
 * decode kernel keeps a head's q and k (2*dk floats) in shared memory. */
#define CUDA_MAX_DK (32u * 128u)

metrale_status cuda_kernels_check_launch(const metrale_kernel_info *info, const gpu_arg *args) {
  const char *k = info->name;
  if (has(info, "nk") && has(info, "nv") && strcmp(k, "split_qkvzba35") != 0) {
    uint32_t nk = u32_arg(info, args, "nk"), nv = u32_arg(info, args, "nv");
    if (nk == 0 || nv % nk != 0)
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: nv (%u) must be a non-zero multiple of nk (%u)",
                           k, nv, nk);
  }
  if ((strncmp(k, "delta_rule_", 11) == 0 || strncmp(k, "gdn_decode_", 11) == 0) && has(info, "dk") &&
      u32_arg(info, args, "dk") > CUDA_MAX_DK)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: dk = %u is above the %u the cuda kernels support", k,
                         u32_arg(info, args, "dk"), CUDA_MAX_DK);
  const int r4 = strcmp(k, "gdn_decode_pair35_r4") == 0; /* four value heads a key head; the others up to two */
  if (r4 || strcmp(k, "gdn_decode_cluster35") == 0 || strcmp(k, "gdn_decode_pair35") == 0) {
    uint32_t nk = u32_arg(info, args, "nk"), nv = u32_arg(info, args, "nv");
    if (u32_arg(info, args, "dk") != 128 || u32_arg(info, args, "dv") != 128 || (r4 ? nv != 4 * nk : nv > 2 * nk))
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs dk = dv = 128 and nv/nk %s (got dk %u, dv %u, nk %u, nv %u)",
                           k, r4 ? "= 4" : "<= 2", u32_arg(info, args, "dk"), u32_arg(info, args, "dv"), nk, nv);
  }
  if (strncmp(k, "gdn_decode_pair35", 17) == 0 && (args[metrale_kernel_arg_index(info, "state")].v.ptr & 15u) != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs a 16-byte aligned state", k);
  if (strncmp(k, "conv1d_prefill_l2norm", 21) == 0) { /* and its _xh, _xhv, _qkh forms */
    uint32_t c = u32_arg(info, args, "c"), dk = u32_arg(info, args, "dk"), nk = u32_arg(info, args, "nk");
    const int planes = strcmp(k, "conv1d_prefill_l2norm_qkh") == 0; /* q and k into ws's planes: dk = 128 */
    int y = metrale_kernel_arg_index(info, planes ? "ws" : "y"), x = metrale_kernel_arg_index(info, "x"),
        vh = metrale_kernel_arg_index(info, "vh");
    const uint64_t xa = strcmp(k, "conv1d_prefill_l2norm") == 0 ? 15u : 7u; /* 4 floats or 4 halves */
    if (c % 4 != 0 || dk < 4 || dk > 128 || (dk & (dk - 1)) != 0 || (planes && dk != 128) ||
        2 * (uint64_t)nk * dk > c || (args[y].v.ptr & 15u) != 0 || (args[x].v.ptr & xa) != 0 ||
        (vh >= 0 && (args[vh].v.ptr & 7u) != 0))
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs C %% 4 == 0 (C = %u), dk %s (dk = %u), 2*nk*dk <= C "
                           "(nk = %u), a %u-byte aligned x, a 16-byte aligned %s%s", k, c,
                           planes ? "= 128" : "a power of two in [4, 128]", dk, nk, (unsigned)xa + 1u,
                           planes ? "ws" : "y", vh >= 0 ? " and an 8-byte aligned vh" : "");
  }
  if (strncmp(k, "delta_rule_prefill_chunked_f16_prep", 35) == 0) { /* and _prep_vh */
    int vh = metrale_kernel_arg_index(info, "vh");
    if (u32_arg(info, args, "phase") != 0)
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: phase %u (only 0: phase 1 is delta_rule_prefill_chunked_f16's)", k,
                           u32_arg(info, args, "phase"));
    if (vh >= 0 && (args[vh].v.ptr & 15u) != 0)
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs a 16-byte aligned vh", k);
  }
  if (strncmp(k, "delta_rule_prefill_chunked_wh", 29) == 0) { /* and _prep, _prep_qkh, _seg */
    const int prep = strncmp(k, "delta_rule_prefill_chunked_wh_prep", 34) == 0;
    const int seg = strcmp(k, "delta_rule_prefill_chunked_wh_seg") == 0;
    const uint32_t phase = u32_arg(info, args, "phase"), nseg = u32_arg(info, args, "nseg"),
                   w0 = u32_arg(info, args, "w0");
    if (seg && (phase < 1 || phase > 3 || nseg < METRALE_WH_NSEG_MIN || nseg > METRALE_WH_NSEG_MAX ||
                w0 < METRALE_WH_W0_MIN || w0 > METRALE_WH_W0_MAX))
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: phase %u, nseg %u, w0 %u (phases 1 to 3, %d to %d segments, w0 %d to %d)",
                           k, phase, nseg, w0, METRALE_WH_NSEG_MIN, METRALE_WH_NSEG_MAX, METRALE_WH_W0_MIN,
                           METRALE_WH_W0_MAX);
    if (!seg && phase != (prep ? 0u : 1u))
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: phase %u (only %u)", k, phase, prep ? 0u : 1u);
    if (u32_arg(info, args, "dk") != 128 || u32_arg(info, args, "dv") != 128)
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: dk = %u, dv = %u (only 128)", k, u32_arg(info, args, "dk"),
                           u32_arg(info, args, "dv"));
    for (int a = prep; a < 2; a++) { /* vh; and o where phase 1 stores it */
      const char *name = a ? "vh" : "o";
      if ((args[metrale_kernel_arg_index(info, name)].v.ptr & 15u) != 0)
        return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs a 16-byte aligned %s", k, name);
    }
  }
  if (has(info, "kw") && u32_arg(info, args, "kw") == 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: kw must be >= 1", k);
  if (strcmp(k, "moe_topk") == 0 && has(info, "e") && u32_arg(info, args, "e") == 0 && u32_arg(info, args, "t") != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "moe_topk: e must be >= 1");
  if (strcmp(k, "moe_gate_up") == 0 && has(info, "k") && u32_arg(info, args, "k") == 0 && u32_arg(info, args, "r") != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "moe_gate_up: k must be >= 1");
  if (strcmp(k, "moe_gate_up_silu_rows") == 0 && u32_arg(info, args, "k") == 0 && u32_arg(info, args, "r") != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "moe_gate_up_silu_rows: k must be >= 1");
  if ((strcmp(k, "moe_gate_up_silu_sorted_ws") == 0 || strcmp(k, "moe_gate_up_silu_rows") == 0) &&
      u32_arg(info, args, "n") % 2u != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: n = %u is odd (gate rows then as many up rows)", k,
                         u32_arg(info, args, "n"));
  if (strcmp(k, "gemm_f16_ws_cols3") == 0 || strcmp(k, "gemm_f16_ws_cols3q") == 0) {
    uint32_t n0 = u32_arg(info, args, "n0"), n1 = u32_arg(info, args, "n1"), n2 = u32_arg(info, args, "n2");
    uint64_t ys = args[metrale_kernel_arg_index(info, "y0")].v.ptr | args[metrale_kernel_arg_index(info, "y1")].v.ptr |
                  args[metrale_kernel_arg_index(info, "y2")].v.ptr;
    if (n0 % 2u != 0 || n1 % 2u != 0 || (ys & 7u) != 0 || (uint64_t)n0 + n1 + n2 > UINT32_MAX)
      return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs n0 and n1 even (n0 = %u, n1 = %u), n0 + n1 + n2 < 2^32 "
                           "(n2 = %u) and 8-byte aligned y0, y1, y2", k, n0, n1, n2);
  }
  return METRALE_OK;
}

metrale_status cuda_kernels_check_block(const metrale_kernel_info *info, gpu_dim3 block) {
  if (block.x != info->block || block.y != 1 || block.z != 1)
    return METRALE_ERROR(INVALID_ARGUMENT,
                         "%s.%s is built for blocks of %u threads, launched with %ux%ux%u",
                         info->module, info->name, info->block, block.x, block.y, block.z);
  return METRALE_OK;
}

void **cuda_kernels_params(cuda_kernel_params *p, const gpu_arg *args, uint32_t nargs) {
  for (uint32_t i = 0; i < nargs; i++) {
    switch (args[i].kind) {
      case GPU_ARG_PTR: p->values[i].u64 = args[i].v.ptr; p->ptrs[i] = &p->values[i].u64; break;
      case GPU_ARG_U64: p->values[i].u64 = args[i].v.u64; p->ptrs[i] = &p->values[i].u64; break;
      case GPU_ARG_U32: p->values[i].u32 = args[i].v.u32; p->ptrs[i] = &p->values[i].u32; break;
      case GPU_ARG_I32: p->values[i].i32 = args[i].v.i32; p->ptrs[i] = &p->values[i].i32; break;
      case GPU_ARG_F32: p->values[i].f32 = args[i].v.f32; p->ptrs[i] = &p->values[i].f32; break;
    }
  }
  return nargs ? p->ptrs : NULL;
}
