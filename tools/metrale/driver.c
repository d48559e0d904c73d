#include "driver.h"

#include <stdlib.h>

/* One call of the layer over rows [from[i], from[i] + n[i]) of each sequence i. */
metrale_status driver_step(run_ctx *c, const uint32_t *from, const uint32_t *n, int decode) {
  int32_t cu[MAX_SEQS + 1], slots[MAX_SEQS];
  uint32_t S = 0, T = 0;
  cu[0] = 0;
  size_t row = (size_t)c->H;
  for (uint32_t i = 0; i < c->nseq; i++) {
    if (decode && n[i] == 0) continue; /* decode: only sequences with a token now */
    slots[S] = (int32_t)i;
    T += n[i];
    cu[S + 1] = (int32_t)T;
    S++;
  }
  if (S == 0) return METRALE_OK;
  /* the mixer's input is f32, the layer's bf16 (qwen3_ssm.h) */
  const int f32_in = c->part == METRALE_PART_MIXER;
  const size_t esize = f32_in ? 4 : 2;
  void *in = malloc((size_t)T * row * esize);
  if (!in) return METRALE_ERROR(OUT_OF_MEMORY, "input staging");
  size_t t = 0;
  for (uint32_t i = 0; i < c->nseq; i++) {
    const float *src = c->x + (c->first[i] + from[i]) * row;
    for (size_t e = 0; e < (size_t)n[i] * row; e++, t++) {
      if (f32_in) ((float *)in)[t] = src[e];
      else ((metrale_bf16 *)in)[t] = metrale_f32_to_bf16(src[e]);
    }
  }
  metrale_status s = c->be->vt->copy_h2d(c->be, c->dx, in, (uint64_t)T * row * esize, NULL);
  if (!s) s = c->be->vt->stream_sync(c->be, NULL);
  free(in);
  if (!s) s = decode ? metrale_qwen3_ssm_decode(c->layer, c->pool, c->part, slots, S, c->dx, c->dy, NULL)
                     : metrale_qwen3_ssm_prefill(c->layer, c->pool, c->part, cu, slots, S, c->dx, c->dy, NULL);
  if (s) return s;
  metrale_bf16 *out = malloc((size_t)T * row * sizeof *out);
  if (!out) return METRALE_ERROR(OUT_OF_MEMORY, "output staging");
  s = c->be->vt->copy_d2h(c->be, out, c->dy, (uint64_t)T * row * 2, NULL);
  if (!s) s = c->be->vt->stream_sync(c->be, NULL);
  t = 0;
  for (uint32_t i = 0; i < c->nseq && !s; i++) {
    if (n[i] == 0) continue;
    float *dst = c->y + (c->first[i] + from[i]) * row;
    for (size_t e = 0; e < (size_t)n[i] * row; e++) dst[e] = metrale_bf16_to_f32(out[t * row + e]);
    t += n[i];
  }
  free(out);
  return s;
}

metrale_status driver_run(run_ctx *c, run_mode mode, uint32_t split) {
  uint32_t from[MAX_SEQS], n[MAX_SEQS], maxlen = 0;
  for (uint32_t i = 0; i < c->nseq; i++) maxlen = c->len[i] > maxlen ? c->len[i] : maxlen;
  switch (mode) {
    case MODE_PREFILL:
      for (uint32_t i = 0; i < c->nseq; i++) from[i] = 0, n[i] = c->len[i];
      return driver_step(c, from, n, 0);
    case MODE_SPLIT:
      for (uint32_t i = 0; i < c->nseq; i++) from[i] = 0, n[i] = c->len[i] < split ? c->len[i] : split;
      METRALE_RETURN_IF_ERROR(driver_step(c, from, n, 0));
      for (uint32_t i = 0; i < c->nseq; i++) from[i] = n[i], n[i] = c->len[i] - n[i];
      return driver_step(c, from, n, 0);
    case MODE_DECODE:
      for (uint32_t t = 0; t < maxlen; t++) {
        for (uint32_t i = 0; i < c->nseq; i++) from[i] = t, n[i] = t < c->len[i] ? 1 : 0;
        METRALE_RETURN_IF_ERROR(driver_step(c, from, n, 1));
      }
      return METRALE_OK;
  }
  return METRALE_ERROR(INVALID_ARGUMENT, "unknown mode");
}

