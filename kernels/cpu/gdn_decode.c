/* gdn_decode module: the fused decode mixer, as the composition of the kernels it
 * replaces (kernels.def defines it so), run one after the other on scratch buffers; and
 * its small-batch split into gdn_decode_heads (the same without the conv-state write)
 * and gdn_decode_conv_shift (that write alone). */
#include "cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

static metrale_status check_fused(const char *kernel, uint32_t nk, uint32_t nv, uint32_t kw) {
  if (nk == 0 || nv % nk != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: nv (%u) must be a non-zero multiple of nk (%u)",
                         kernel, nv, nk);
  if (kw == 0) return METRALE_ERROR(INVALID_ARGUMENT, "%s: kw must be >= 1", kernel);
  return METRALE_OK;
}

/* Arguments in signature order: y p conv_w conv_state a_log dt_bias norm_w state slots bsz
 * nk nv dk dv kw eps.  conv_slots: the slots of the conv state (slots, or the heads
 * kernel's private copy). */
static metrale_status decode_fused_with(const gpu_arg *args, int qwen35, float *conv_state,
                                        const int32_t *conv_slots) {
  const uint32_t bsz = cpu_arg_u(args, 9), nk = cpu_arg_u(args, 10), nv = cpu_arg_u(args, 11),
                 dk = cpu_arg_u(args, 12), dv = cpu_arg_u(args, 13), kw = cpu_arg_u(args, 14);
  metrale_bf16 *y = cpu_arg_p(args, 0);
  const float *p = cpu_arg_p(args, 1);
  const metrale_bf16 *conv_w = cpu_arg_p(args, 2);
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

  if (qwen35)
    cpu_split_qkvzba35(mixed, z, bb, aa, p, bsz, nk, nv, dk, dv);
  else
    cpu_split_qkvzba(mixed, z, bb, aa, p, bsz, nk, nv, dk, dv);
  cpu_conv1d_update(qkv, mixed, conv_w, conv_state, conv_slots, bsz, (uint32_t)c, kw);
  cpu_l2norm_qk(qkv, bsz, nk, dk, (uint32_t)c);
  cpu_gates(g, beta, aa, bb, a_log, dt_bias, bsz * nv, nv);
  metrale_status s = cpu_delta_rule_decode(o, qkv, g, beta, state, slots, bsz, nk, nv, dk, dv);
  if (!s) cpu_gated_rmsnorm(y, o, z, norm_w, bsz * nv, dv, eps);
  free(buf);
  return s;
}

static metrale_status decode_fused(const gpu_arg *args, int qwen35) {
  METRALE_RETURN_IF_ERROR(check_fused(qwen35 ? "gdn_decode_fused35" : "gdn_decode_fused",
                                      cpu_arg_u(args, 10), cpu_arg_u(args, 11), cpu_arg_u(args, 14)));
  if (cpu_arg_u(args, 9) == 0) return METRALE_OK;
  return decode_fused_with(args, qwen35, cpu_arg_p(args, 3), cpu_arg_p(args, 8));
}

/* The fused composition on a copy of each named slot's conv state [B, C, K-1], which is
 * then dropped: conv_state itself is only read. */
static metrale_status decode_heads(const gpu_arg *args, int qwen35) {
  const uint32_t bsz = cpu_arg_u(args, 9), nk = cpu_arg_u(args, 10), nv = cpu_arg_u(args, 11),
                 dk = cpu_arg_u(args, 12), dv = cpu_arg_u(args, 13), kw = cpu_arg_u(args, 14);
  METRALE_RETURN_IF_ERROR(check_fused(qwen35 ? "gdn_decode_heads35" : "gdn_decode_heads", nk, nv, kw));
  if (bsz == 0) return METRALE_OK;
  const float *conv_state = cpu_arg_p(args, 3);
  const int32_t *slots = cpu_arg_p(args, 8);
  const size_t per = (2 * (size_t)nk * dk + (size_t)nv * dv) * (kw - 1);
  float *copy = malloc((per ? per * bsz : 1) * sizeof(float));
  int32_t *own = malloc(bsz * sizeof(int32_t));
  if (!copy || !own) {
    free(copy), free(own);
    return METRALE_ERROR(OUT_OF_MEMORY, "decode heads: conv state copy for a batch of %u", bsz);
  }
  for (uint32_t i = 0; i < bsz; i++) {
    own[i] = slots[i] < 0 ? -1 : (int32_t)i;
    if (slots[i] >= 0 && per) memcpy(copy + i * per, conv_state + (size_t)slots[i] * per, per * sizeof(float));
  }
  metrale_status s = decode_fused_with(args, qwen35, copy, own);
  free(copy), free(own);
  return s;
}

metrale_status cpu_k_gdn_decode_fused(const gpu_arg *args) { return decode_fused(args, 0); }
metrale_status cpu_k_gdn_decode_fused35(const gpu_arg *args) { return decode_fused(args, 1); }
metrale_status cpu_k_gdn_decode_heads(const gpu_arg *args) { return decode_heads(args, 0); }
metrale_status cpu_k_gdn_decode_heads35(const gpu_arg *args) { return decode_heads(args, 1); }

/* Arguments: p conv_state slots bsz nk nv dk dv kw layout.  The conv input rows come
 * from the split kernels; each named slot's history drops its oldest value. */
metrale_status cpu_k_gdn_decode_conv_shift(const gpu_arg *args) {
  const float *p = cpu_arg_p(args, 0);
  float *conv_state = cpu_arg_p(args, 1);
  const int32_t *slots = cpu_arg_p(args, 2);
  const uint32_t bsz = cpu_arg_u(args, 3), nk = cpu_arg_u(args, 4), nv = cpu_arg_u(args, 5),
                 dk = cpu_arg_u(args, 6), dv = cpu_arg_u(args, 7), kw = cpu_arg_u(args, 8),
                 layout = cpu_arg_u(args, 9);
  METRALE_RETURN_IF_ERROR(check_fused("gdn_decode_conv_shift", nk, nv, kw));
  if (bsz == 0 || kw < 2) return METRALE_OK;
  const size_t c = 2 * (size_t)nk * dk + (size_t)nv * dv, vw = (size_t)nv * dv, b = bsz, hist = kw - 1;
  /* mixed [B,C]; z [B,nv*dv]; b, a [B,nv] */
  float *buf = malloc((b * c + b * vw + 2 * b * nv) * sizeof(float));
  if (!buf) return METRALE_ERROR(OUT_OF_MEMORY, "conv shift scratch for a batch of %u", bsz);
  float *mixed = buf, *z = mixed + b * c, *bb = z + b * vw, *aa = bb + b * nv;
  if (layout)
    cpu_split_qkvzba35(mixed, z, bb, aa, p, bsz, nk, nv, dk, dv);
  else
    cpu_split_qkvzba(mixed, z, bb, aa, p, bsz, nk, nv, dk, dv);
  for (uint32_t i = 0; i < bsz; i++) {
    if (slots[i] < 0) continue;
    float *st = conv_state + (size_t)slots[i] * c * hist;
    for (size_t ch = 0; ch < c; ch++) {
      float *h = st + ch * hist;
      memmove(h, h + 1, (hist - 1) * sizeof(float));
      h[hist - 1] = mixed[i * c + ch];
    }
  }
  free(buf);
  return METRALE_OK;
}
