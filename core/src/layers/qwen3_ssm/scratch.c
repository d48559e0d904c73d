/* Scratch memory of a forward call: one allocation carved into the buffers of
 * qwen3_ssm_scratch, grown when a call needs more tokens or sequences. */
#include <stdlib.h>

#include "layer.h"

#define ALIGN 256u

static uint64_t take(uint64_t *used, uint64_t bytes) {
  uint64_t at = *used;
  *used += (bytes + ALIGN - 1) / ALIGN * ALIGN;
  return at;
}

/* Lays the buffers out for T tokens and S sequences; returns the total size. */
static uint64_t layout(const metrale_qwen3_ssm_layer *L, uint32_t T, uint32_t S,
                       qwen3_ssm_scratch *o) {
  const qwen3_ssm_dims *d = &L->d;
  const uint64_t t = T, bf = 2, H = d->H, nvdv = (uint64_t)d->nv * d->dv;
  const uint64_t chunk = qwen3_ssm_ffn_chunk(&L->ops, d, L->moe), tc = T < chunk ? T : chunk;
  uint64_t u = 0;
  o->xn = take(&u, t * H * 4);
  /* proj is decode's; a prefill's fp16 x (mixer.c) uses its bytes */
  o->proj = take(&u, t * (d->P * 4 > H * 2 ? d->P * 4 : H * 2));
  o->x16 = o->proj;
  /* mixed is the prefill's conv input and the unfused decode's split output; a large decode
   * batch's fp16 x (mixer.c) uses its bytes first, so it holds a row of either; where the
   * prefill's mixed is IEEE half, the conv's v in half (vh) follows it in the same bytes */
  const uint64_t vh_at = (t * d->C * 2 + ALIGN - 1) / ALIGN * ALIGN, vh_end = vh_at + t * nvdv * 2;
  uint64_t mixed_bytes = t * (d->C * 4 > H * 2 ? d->C * 4 : H * 2);
  o->mixed = take(&u, mixed_bytes > vh_end ? mixed_bytes : vh_end);
  o->x16_decode = o->mixed;
  o->vh = o->mixed + vh_at;
  o->z = take(&u, t * nvdv * 4);
  o->b = take(&u, 2 * t * d->nv * 4); /* b [T, nv] then a [T, nv]; prefill: [T, 2nv] rows [b | a] */
  o->a = o->b + t * d->nv * 4;
  o->qkv = take(&u, t * d->C * 4);
  o->g = take(&u, t * d->nv * 4);
  o->beta = take(&u, t * d->nv * 4);
  o->o = take(&u, t * nvdv * bf);
  o->on = take(&u, t * nvdv * bf);
  o->mix_out = take(&u, t * H * bf);
  o->h = take(&u, t * H * bf);
  o->hn = take(&u, t * H * bf);
  o->cu = take(&u, (S + 1ull) * 4);
  o->slots = take(&u, (S + 1ull) * 4);
  if (L->moe) {
    const uint64_t rows = tc * d->topk;
    /* y in bf16 and no gu where the grouped kernels run (ops.c): half and none of the f32 sizes */
    const metrale_moe_bytes need = metrale_ops_moe_bytes(&L->ops, (uint32_t)rows, d->topk, d->E, d->H, d->mI);
    o->f_gu = take(&u, need.gu);
    o->f_act = take(&u, rows * d->mI * bf);
    o->f_out = take(&u, tc * H * bf);
    o->logits = take(&u, tc * (d->E + 1ull) * 4);
    o->idx = take(&u, rows * 4);
    o->perm = take(&u, rows * 4);
    o->tiles = take(&u, metrale_moe_slots((uint32_t)rows, d->E) * 3 * 4);
    o->rw = take(&u, rows * 4);
    o->ey = take(&u, need.y);
    o->s_gu = take(&u, tc * 2 * d->sI * bf);
    o->s_act = take(&u, tc * d->sI * bf);
  } else {
    o->f_gu = take(&u, tc * 2 * d->I * bf);
    o->f_act = take(&u, tc * d->I * bf);
    o->f_out = take(&u, tc * H * bf);
  }
  return u;
}

metrale_status qwen3_ssm_scratch_reserve(metrale_qwen3_ssm_layer *L, uint32_t T, uint32_t S) {
  if (L->scratch_block && T <= L->scratch_tokens && S <= L->scratch_seqs) return METRALE_OK;
  uint32_t nt = T > L->scratch_tokens ? T : L->scratch_tokens;
  uint32_t ns = S > L->scratch_seqs ? S : L->scratch_seqs;
  if (nt == 0) nt = 1;
  if (ns == 0) ns = 1;
  qwen3_ssm_scratch offs;
  uint64_t bytes = layout(L, nt, ns, &offs);
  int32_t *lists = malloc(QWEN3_SSM_LIST_RING * (2ull * ns + 1) * sizeof *lists);
  if (!lists) return METRALE_ERROR(OUT_OF_MEMORY, "slot list cache");
  gpu_ptr block = 0;
  metrale_status s = metrale_alloc(L->dev, bytes, &block);
  if (s) {
    free(lists);
    return metrale_status_annotate(s, "scratch for %u tokens (%.1f MB)", nt, (double)bytes / 1e6);
  }
  /* the old block may still be in use by queued work */
  gpu_backend *be = metrale_device_backend(L->dev);
  s = be->vt->sync(be);
  if (s) {
    metrale_free(L->dev, block);
    free(lists);
    return s;
  }
  qwen3_ssm_graphs_clear(L); /* they point into the old block */
  metrale_free(L->dev, L->scratch_block);
  free(L->lists_host);
  L->lists_host = lists;
  L->lists_n = 0; /* the new block holds no lists yet */
  L->lists_at = 0;
  L->lists_queued = 0; /* synced above */
  L->scratch_block = block;
  L->scratch_tokens = nt;
  L->scratch_seqs = ns;
  gpu_ptr *dst = (gpu_ptr *)&L->s;
  const gpu_ptr *src = (const gpu_ptr *)&offs;
  for (size_t i = 0; i < sizeof offs / sizeof(gpu_ptr); i++) dst[i] = block + src[i];
  return METRALE_OK;
}

metrale_status qwen3_ssm_delta_ws_reserve(metrale_qwen3_ssm_layer *L, uint32_t T, uint32_t S) {
  const qwen3_ssm_dims *d = &L->d;
  uint64_t bytes = metrale_ops_delta_rule_ws_bytes(&L->ops, T, S, d->nv, d->dk, d->dv);
  if (bytes <= L->delta_ws_bytes) return METRALE_OK;
  gpu_ptr ws = 0;
  metrale_status s = metrale_alloc(L->dev, bytes, &ws);
  if (s) return metrale_status_annotate(s, "delta-rule workspace (%.1f MB)", (double)bytes / 1e6);
  gpu_backend *be = metrale_device_backend(L->dev); /* the old one may still be in use */
  s = be->vt->sync(be);
  if (s) {
    metrale_free(L->dev, ws);
    return s;
  }
  metrale_free(L->dev, L->delta_ws);
  L->delta_ws = ws;
  L->delta_ws_bytes = bytes;
  return METRALE_OK;
}
