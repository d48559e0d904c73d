/* The Gated DeltaNet mixer (DESIGN.md section 4), T tokens:
 *
 *   mixed [T, C], z [T, nv*dv], b, a [T, nv] = x [T, H] . in_proj^T   (x .. o in f32, mixed
 *                       in IEEE half where in_proj is gemm_f16_ws_cols3q;
 *                       in_proj's rows are [q | k | v | z | b | a] for both families,
 *                       weights.c: prefill runs one GEMM per piece, or one GEMM whose
 *                       columns go to the pieces (gemm_f16_ws_cols3), decode one gemv
 *                       into proj [B, P] and the Qwen3.5-layout split or fused kernel;
 *                       prefill's projections, and the proj of a decode batch past the
 *                       gemv's rows, on fp16(x) and in_proj16 where the backend has
 *                       gemm_f16_ws (and its split forms) and their tiles pay:
 *                       docs/numerics.md)
 *   qkv   [T, C]      = silu(causal_conv(mixed, conv state))       state updated (prefill:
 *                       v into vh [T, nv*dv] in IEEE half instead, for the fp16 core's
 *                       phase 0, where mixed is half: op_delta_rule_prefill; and q, k
 *                       in IEEE half into the whole-head core's planes where it takes
 *                       them: metrale_ops_qk_planes_fits)
 *   q, k              = l2norm per head (q also * dk^-1/2)         in place in qkv (prefill:
 *                       in the conv's pass where the backend can)
 *   g, beta [T, nv]   = -exp(A_log) * softplus(a + dt_bias), sigmoid(b)   (prefill: b and a
 *                       by one GEMM into rows [b | a] where the backend has gates_ba)
 *   o     [T, nv, dv] = gated delta rule over each sequence         state updated, bf16
 *                       (prefill: in chunks of 64 tokens where the backend can and
 *                       the sequences are long enough: op_delta_rule_prefill)
 *   on    [T, nv*dv]  = rmsnorm(o) * w * silu(z)
 *   out   [T, H]      = on . out_proj^T
 * Decode runs split .. gated norm as one kernel when the backend has it (gdn_decode_fused35). */
#include "layer.h"

int qwen3_ssm_one_in_proj(const metrale_ops *o, const qwen3_ssm_dims *d, uint32_t T) {
  return metrale_ops_f16_in_proj_fits(o, T, d->C, d->nv * d->dv, 2 * d->nv, d->H);
}

int qwen3_ssm_takes_x16(const metrale_ops *o, const qwen3_ssm_dims *d, int have16, uint32_t T, int decode) {
  if (!have16) return 0;
  return decode ? metrale_ops_f16_gemm_fits(o, T, d->P, d->H) : qwen3_ssm_one_in_proj(o, d, T);
}

int qwen3_ssm_mixer_takes_x16(const metrale_qwen3_ssm_layer *L, uint32_t T, int decode) {
  return qwen3_ssm_takes_x16(&L->ops, &L->d, L->w.in_proj16 != 0, T, decode);
}

gpu_ptr qwen3_ssm_mixer_x16(const metrale_qwen3_ssm_layer *L, int decode) {
  return decode ? L->s.x16_decode : L->s.x16;
}

/* A prefill's in_proj: mixed [T, C], z [T, nv*dv], and g, beta [T, nv] from b and a.  All of it by
 * one GEMM on fp16(x) where the backend has gemm_f16_ws_cols3 and its tiles pay, mixed then in
 * IEEE half where the conv can take it (*mixed_half set: metrale_ops_mixed_half_fits); else
 * q|k|v and z each on fp16(x) or f32 x, b and a on f32 x. */
static metrale_status prefill_in_proj(metrale_qwen3_ssm_layer *L, gpu_ptr x, uint32_t T, int x16_ready,
                                      gpu_stream st, int *mixed_half) {
  const metrale_ops *o = &L->ops;
  const qwen3_ssm_dims *d = &L->d;
  const qwen3_ssm_scratch *s = &L->s;
  const qwen3_ssm_weights *w = &L->w;
  const uint32_t nvdv = d->nv * d->dv;
  *mixed_half = 0;
  if (qwen3_ssm_mixer_takes_x16(L, T, 0)) {
    const int half = metrale_ops_mixed_half_fits(o, s->qkv, s->mixed, T, d->C, d->dk);
    if (!x16_ready) METRALE_RETURN_IF_ERROR(op_f32_to_f16(o, st, s->x16, x, T * d->H));
    METRALE_RETURN_IF_ERROR(op_gemm_f16_cols3(o, st, s->mixed, s->z, s->b, s->x16, w->in_proj16, T, d->C, nvdv,
                                              2 * d->nv, d->H, half));
    *mixed_half = half;
    return op_gates_ba(o, st, s->g, s->beta, s->b, w->a_log, w->dt_bias, T, d->nv);
  }
  const uint64_t row = (uint64_t)d->H * 2; /* bytes of an in_proj row */
  const gpu_ptr wz = w->in_proj + (uint64_t)d->C * row, wb = wz + (uint64_t)nvdv * row;
  const int f16_qkv = w->in_proj16 && metrale_ops_f16_gemm_fits(o, T, d->C, d->H);
  const int f16_z = w->in_proj16 && metrale_ops_f16_gemm_fits(o, T, nvdv, d->H);
  if (f16_qkv || f16_z) METRALE_RETURN_IF_ERROR(op_f32_to_f16(o, st, s->x16, x, T * d->H));
  if (f16_qkv)
    METRALE_RETURN_IF_ERROR(op_gemm_f16(o, st, s->mixed, s->x16, w->in_proj16, T, d->C, d->H));
  else
    METRALE_RETURN_IF_ERROR(op_gemm_f32in(o, st, s->mixed, x, w->in_proj, T, d->C, d->H));
  if (f16_z)
    METRALE_RETURN_IF_ERROR(op_gemm_f16(o, st, s->z, s->x16, w->in_proj16 + (uint64_t)d->C * d->H * 2, T, nvdv, d->H));
  else
    METRALE_RETURN_IF_ERROR(op_gemm_f32in_z(o, st, s->z, x, wz, T, nvdv, d->H));
  /* b and a (in_proj's last 2 nv rows, b first) and from them g and beta */
  return op_ba_gates(o, st, s->g, s->beta, s->b, x, wb, w->a_log, w->dt_bias, T, d->nv, d->H);
}

metrale_status qwen3_ssm_mixer(metrale_qwen3_ssm_layer *L, metrale_state_pool *pool, gpu_ptr x,
                               gpu_ptr out, uint32_t T, uint32_t S, int decode, int x16_ready, gpu_stream st) {
  const metrale_ops *o = &L->ops;
  const qwen3_ssm_dims *d = &L->d;
  const qwen3_ssm_scratch *s = &L->s;
  const qwen3_ssm_weights *w = &L->w;
  const gpu_ptr conv_state = metrale_state_pool_conv(pool);
  const gpu_ptr rec_state = metrale_state_pool_recurrent(pool);

  const uint32_t nvdv = d->nv * d->dv;
  int mixed_half = 0; /* prefill: mixed in IEEE half (prefill_in_proj) */
  if (x16_ready && !qwen3_ssm_mixer_takes_x16(L, T, decode))
    return METRALE_ERROR(INTERNAL, "mixer given fp16 x where it reads f32 x (%u tokens, %s)", T,
                         decode ? "decode" : "prefill");
  if (decode) {
    /* the whole projection on fp16(x) where an fp16 GEMM takes the batch (on the H200 from 3
     * tokens: the split forms to 128, the 128x256 pairs from 129; docs/numerics.md), else on
     * f32 x */
    if (qwen3_ssm_mixer_takes_x16(L, T, 1)) {
      if (!x16_ready) METRALE_RETURN_IF_ERROR(op_f32_to_f16(o, st, s->x16_decode, x, T * d->H));
      METRALE_RETURN_IF_ERROR(op_gemm_f16(o, st, s->proj, s->x16_decode, w->in_proj16, T, d->P, d->H));
    } else {
      METRALE_RETURN_IF_ERROR(op_gemm_f32in(o, st, s->proj, x, w->in_proj, T, d->P, d->H));
    }
    if (metrale_ops_has_gdn_decode_fused(o)) {
      /* one launch from proj to the gated-norm output, each state read and written once */
      METRALE_RETURN_IF_ERROR(op_gdn_decode_fused(o, st, s->on, s->proj, w->conv, conv_state, w->a_log,
                                                  w->dt_bias, w->gnorm, rec_state, s->slots, T, d->nk,
                                                  d->nv, d->dk, d->dv, d->K, d->eps));
      return op_gemm(o, st, out, s->on, w->out_proj, T, d->H, nvdv);
    }
    METRALE_RETURN_IF_ERROR(op_split(o, st, s->mixed, s->z, s->b, s->a, s->proj, T, d->nk, d->nv, d->dk, d->dv));
  } else {
    METRALE_RETURN_IF_ERROR(prefill_in_proj(L, x, T, x16_ready, st, &mixed_half));
  }
  if (decode) {
    METRALE_RETURN_IF_ERROR(op_conv1d_update(o, st, s->qkv, s->mixed, w->conv, conv_state, s->slots,
                                             T, d->C, d->K));
    METRALE_RETURN_IF_ERROR(op_l2norm_qk(o, st, s->qkv, T, d->nk, d->dk, d->C));
    METRALE_RETURN_IF_ERROR(op_gates(o, st, s->g, s->beta, s->a, s->b, w->a_log, w->dt_bias, T * d->nv, d->nv));
    METRALE_RETURN_IF_ERROR(op_delta_rule_decode(o, st, s->o, s->qkv, s->g, s->beta, rec_state,
                                                 s->slots, T, d->nk, d->nv, d->dk, d->dv));
  } else {
    /* v in IEEE half from the conv to the fp16 core's phase 0 where mixed is half and the core
     * takes that kernel (metrale_ops_v_half_fits) */
    const gpu_ptr vh = mixed_half && metrale_ops_v_half_fits(o, s->vh, L->delta_ws, T, S, d->dk, d->dv) ? s->vh : 0;
    /* and q and k in IEEE half straight into the whole-head core's planes where it takes them */
    const int planes = vh && metrale_ops_qk_planes_fits(o, s->o, vh, L->delta_ws, T, S, d->nv, d->dk, d->dv);
    METRALE_RETURN_IF_ERROR(op_conv1d_prefill_l2norm(o, st, s->qkv, s->mixed, w->conv, conv_state, s->cu, s->slots,
                                                     T, S, d->C, d->K, d->nk, d->dk, mixed_half, vh,
                                                     planes ? L->delta_ws : 0));
    METRALE_RETURN_IF_ERROR(op_delta_rule_prefill(o, st, s->o, s->qkv, s->g, s->beta, rec_state, s->cu,
                                                  s->slots, L->delta_ws, T, S, d->nk, d->nv, d->dk,
                                                  d->dv, vh, planes));
  }
  METRALE_RETURN_IF_ERROR(op_gated_rmsnorm(o, st, s->on, s->o, s->z, w->gnorm, T * d->nv, d->dv, d->eps));
  return op_gemm(o, st, out, s->on, w->out_proj, T, d->H, nvdv);
}
