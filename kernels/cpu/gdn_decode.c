/* gdn_decode module: the fused decode mixer, as the composition of the kernels it
 * replaces (kernels.def defines it so), run one after the other on scratch buffers. */
#include "cpu_kernels.h"

#include <stdlib.h>

static metrale_status check_fused(const char *kernel, uint32_t nk, uint32_t nv, uint32_t kw) {
  if (nk == 0 || nv % nk != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: nv (%u) must be a non-zero multiple of nk (%u)",
                         kernel, nv, nk);
  if (kw == 0) return METRALE_ERROR(INVALID_ARGUMENT, "%s: kw must be >= 1", kernel);
  return METRALE_OK;
}

/* Arguments in signature order: y p conv_w conv_state a_log dt_bias norm_w state slots bsz
 * nk nv dk dv kw eps. */
static metrale_status decode_fused(const gpu_arg *args) {
  const uint32_t bsz = cpu_arg_u(args, 9), nk = cpu_arg_u(args, 10), nv = cpu_arg_u(args, 11),
                 dk = cpu_arg_u(args, 12), dv = cpu_arg_u(args, 13), kw = cpu_arg_u(args, 14);
  METRALE_RETURN_IF_ERROR(check_fused("gdn_decode_fused35", nk, nv, kw));
  if (bsz == 0) return METRALE_OK;
  metrale_bf16 *y = cpu_arg_p(args, 0);
  const float *p = cpu_arg_p(args, 1);
  const metrale_bf16 *conv_w = cpu_arg_p(args, 2);
  float *conv_state = cpu_arg_p(args, 3);
  const float *a_log = cpu_arg_p(args, 4);
  const metrale_bf16 *dt_bias = cpu_arg_p(args, 5), *norm_w = cpu_arg_p(args, 6);
  float *state = cpu_arg_p(args, 7);
  const int32_t *slots = cpu_arg_p(args, 8);
  const float eps = cpu_arg_f(args, 15);

  const size_t c = 2 * (size_t)nk * dk + (size_t)nv * dv, vw = (size_t)nv * dv, b = bsz;
  /* mixed, qkv [B,C]; z [B,nv*dv]; b, a, g, beta [B,nv]; o bf16 [B,nv*dv] */
  float *buf = malloc((2 * b * c + b * vw + 4 * b * nv) * sizeof(float) + b * vw * sizeof(metrale_bf16));
  if (!buf) return METRALE_ERROR(OUT_OF_MEMORY, "fused decode scratch for a batch of %u", bsz);
  float *mixed = buf, *qkv = mixed + b * c, *z = qkv + b * c, *bb = z + b * vw, *aa = bb + b * nv,
        *g = aa + b * nv, *beta = g + b * nv;
  metrale_bf16 *o = (metrale_bf16 *)(beta + b * nv);

  cpu_split_qkvzba35(mixed, z, bb, aa, p, bsz, nk, nv, dk, dv);
  cpu_conv1d_update(qkv, mixed, conv_w, conv_state, slots, bsz, (uint32_t)c, kw);
  cpu_l2norm_qk(qkv, bsz, nk, dk, (uint32_t)c);
  cpu_gates(g, beta, aa, bb, a_log, dt_bias, bsz * nv, nv);
  metrale_status s = cpu_delta_rule_decode(o, qkv, g, beta, state, slots, bsz, nk, nv, dk, dv);
  if (!s) cpu_gated_rmsnorm(y, o, z, norm_w, bsz * nv, dv, eps);
  free(buf);
  return s;
}

metrale_status cpu_k_gdn_decode_fused35(const gpu_arg *args) { return decode_fused(args); }

/* The cluster kernel's op is the fused one; its contract takes only the Qwen head size
 * with at most two value heads per key head (r4: exactly four), and so does the oracle. */
static metrale_status decode_heads128(const char *kernel, const gpu_arg *args, int r4) {
  const uint32_t nk = cpu_arg_u(args, 10), nv = cpu_arg_u(args, 11), dk = cpu_arg_u(args, 12),
                 dv = cpu_arg_u(args, 13);
  const int ratio_ok = nk != 0 && (r4 ? nv == 4 * nk : nv % nk == 0 && nv / nk <= 2);
  if (dk != 128 || dv != 128 || !ratio_ok)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs dk = dv = 128 and nv/nk %s (got dk %u, dv %u, nk %u, nv %u)",
                         kernel, r4 ? "= 4" : "<= 2", dk, dv, nk, nv);
  return decode_fused(args);
}

metrale_status cpu_k_gdn_decode_cluster35(const gpu_arg *args) {
  return decode_heads128("gdn_decode_cluster35", args, 0);
}

/* So is the pair kernels', with the same shapes and a 16-byte aligned state. */
static metrale_status decode_pair(const char *kernel, const gpu_arg *args, int r4) {
  if (((uintptr_t)cpu_arg_p(args, 7) & 15u) != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs a 16-byte aligned state", kernel);
  return decode_heads128(kernel, args, r4);
}

metrale_status cpu_k_gdn_decode_pair35(const gpu_arg *args) { return decode_pair("gdn_decode_pair35", args, 0); }

/* the r = 4 form: four value heads per key head */
metrale_status cpu_k_gdn_decode_pair35_r4(const gpu_arg *args) { return decode_pair("gdn_decode_pair35_r4", args, 1); }
