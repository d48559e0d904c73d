/* The feed-forward half of the decoder layer, in chunks of qwen3_ssm_ffn_chunk tokens.
 *
 * Dense:  out = res + down(silu(gate(xn)) * up(xn))
 * MoE:    logits [Tc, E+1] = xn . [router ; shared_expert_gate]^T   (f32)
 *         idx, rw [Tc, k]  = top-k of softmax(logits[:, :E]), renormalised
 *         ey [Tc*k, H]     = expert_idx(silu(gate) * up)            (f32; bf16 where the
 *                            backend has the grouped kernels' bf16 pair: op_moe_experts)
 *         out = res + sum_j rw_j ey_j + sigmoid(logits[:, E]) * shared_expert(xn) */
#include "layer.h"

static metrale_status dense(metrale_qwen3_ssm_layer *L, gpu_ptr out, gpu_ptr res, gpu_ptr xn,
                            uint32_t tc, gpu_stream st) {
  const metrale_ops *o = &L->ops;
  const qwen3_ssm_dims *d = &L->d;
  const qwen3_ssm_scratch *s = &L->s;
  METRALE_RETURN_IF_ERROR(op_gate_up_silu(o, st, s->f_act, s->f_gu, xn, L->w.mlp_gate_up, tc, d->I, d->H));
  METRALE_RETURN_IF_ERROR(op_gemm(o, st, s->f_out, s->f_act, L->w.mlp_down, tc, d->H, d->I));
  return op_add(o, st, out, res, s->f_out, (uint64_t)tc * d->H);
}

/* The shared expert: silu(gate(xn)) * up(xn), then its down projection into s.f_out. */
static metrale_status shared_expert(metrale_qwen3_ssm_layer *L, gpu_ptr xn, uint32_t tc, gpu_stream st) {
  const metrale_ops *o = &L->ops;
  const qwen3_ssm_dims *d = &L->d;
  const qwen3_ssm_scratch *s = &L->s;
  METRALE_RETURN_IF_ERROR(op_gate_up_silu(o, st, s->s_act, s->s_gu, xn, L->w.sh_gate_up, tc, d->sI, d->H));
  return op_gemm(o, st, s->f_out, s->s_act, L->w.sh_down, tc, d->H, d->sI);
}

/* Where the backend has stream_wait, the shared expert runs on the layer's second stream
 * beside the routed experts: forked off st once the router's top-k is enqueued, joined back
 * before the combine, which reads both.  The branches write disjoint scratch and read xn,
 * written before the fork.  Otherwise it runs on st after the routed experts.  The same bits
 * either way.
 *
 * Why after the top-k (H200, layer decode as graphs, docs/perf-moe.md): forked right after the
 * norm, so that the shared expert also ran beside the router and the top-k, decode 5 to 12
 * and 256 were 15-22 us slower than on one stream (eagerly launched they were not); forked
 * after the top-k every batch measured gained, 4 to 16 us from 1 to 256 tokens. */
static metrale_status moe(metrale_qwen3_ssm_layer *L, gpu_ptr out, gpu_ptr res, gpu_ptr xn,
                          uint32_t tc, gpu_stream st) {
  const metrale_ops *o = &L->ops;
  const qwen3_ssm_dims *d = &L->d;
  const qwen3_ssm_scratch *s = &L->s;
  const qwen3_ssm_weights *w = &L->w;
  gpu_backend *be = metrale_device_backend(L->dev);
  const uint32_t rows = tc * d->topk;
  METRALE_RETURN_IF_ERROR(op_moe_router_topk(o, st, s->logits, s->idx, s->rw, xn, w->router, L->router_count, tc,
                                             d->E + 1, d->H, d->E, d->topk, (uint32_t)L->cfg.norm_topk_prob));
  const metrale_moe_buffers b = {s->idx, s->perm, s->tiles, s->f_gu, s->f_act, s->ey};
  if (qwen3_ssm_uses_side(L)) {
    METRALE_RETURN_IF_ERROR(be->vt->stream_wait(be, L->side, st)); /* fork */
    metrale_status e = shared_expert(L, xn, tc, L->side);
    if (!e) e = op_moe_experts(o, st, &b, xn, w->exp_gate_up, w->exp_down, rows, d->topk, d->H, d->mI, d->E);
    /* joined back even after a failure, so that no recording is left with a branch open */
    metrale_status j = be->vt->stream_wait(be, st, L->side);
    if (e) {
      metrale_status_free(j);
      return e;
    }
    METRALE_RETURN_IF_ERROR(j);
  } else {
    METRALE_RETURN_IF_ERROR(op_moe_experts(o, st, &b, xn, w->exp_gate_up, w->exp_down, rows, d->topk, d->H, d->mI, d->E));
    METRALE_RETURN_IF_ERROR(shared_expert(L, xn, tc, st));
  }
  return op_moe_combine(o, st, out, res, s->ey, s->rw, s->f_out, s->logits, tc, d->topk, d->H,
                        d->E + 1, d->E, metrale_ops_moe_y_bf16(o, rows, d->topk, d->E, d->H, d->mI));
}

uint32_t qwen3_ssm_ffn_chunk(const metrale_ops *o, const qwen3_ssm_dims *d, int moe) {
  const uint32_t big = QWEN3_SSM_FFN_CHUNK_GROUPED;
  return moe && metrale_ops_moe_y_bf16(o, big * d->topk, d->topk, d->E, d->H, d->mI) ? big : QWEN3_SSM_FFN_CHUNK;
}

metrale_status qwen3_ssm_ffn(metrale_qwen3_ssm_layer *L, gpu_ptr out, gpu_ptr res, gpu_ptr xn,
                             uint32_t T, gpu_stream st) {
  const uint64_t row = (uint64_t)L->d.H * 2; /* bytes of one bf16 [H] row */
  const uint32_t chunk = qwen3_ssm_ffn_chunk(&L->ops, &L->d, L->moe);
  for (uint32_t t0 = 0; t0 < T; t0 += chunk) {
    uint32_t tc = T - t0 < chunk ? T - t0 : chunk;
    gpu_ptr o = out + t0 * row, r = res + t0 * row, x = xn + t0 * row;
    METRALE_RETURN_IF_ERROR(L->moe ? moe(L, o, r, x, tc, st) : dense(L, o, r, x, tc, st));
  }
  return METRALE_OK;
}
