/* The layer's weights: one device allocation, filled tensor by tensor from a source.
 * Projections that run back to back are stacked so that one GEMM does them:
 *   in_proj  = [in_proj_qkv ; in_proj_z ; in_proj_b ; in_proj_a]  (Qwen3.5)
 *            = Qwen3-Next's [in_proj_qkvz ; in_proj_ba], rows reordered into the same
 *              [q | k | v | z | b | a] (each of those grouped per key head there), so that
 *              one layout serves both families and a prefill's projection can be four
 *              GEMMs writing q|k|v, z, b and a where they go (mixer.c)
 *   router   = [mlp.gate ; mlp.shared_expert_gate]
 *   gate_up  = [gate_proj ; up_proj]                  (dense MLP, each expert, shared expert)
 * and, where the backend has the IEEE half projection (gemm_f16_ws), a copy of in_proj in
 * fp16 (in_proj16: the prefill's q|k|v and z, a large decode batch's whole projection). */
#include <stdio.h>
#include <stdlib.h>

#include "layer.h"
#include "metrale/bf16.h"

#define ALIGN 256u

typedef struct carve {
  uint64_t used;
} carve;

static uint64_t take(carve *c, uint64_t bytes) {
  uint64_t at = c->used;
  c->used += (bytes + ALIGN - 1) / ALIGN * ALIGN;
  return at;
}

typedef struct upload_ctx {
  metrale_qwen3_ssm_layer *L;
  metrale_weight_source src;
} upload_ctx;

static metrale_status up(upload_ctx *u, const char *name, metrale_dtype to, gpu_ptr dst,
                         uint32_t ndim, uint64_t d0, uint64_t d1, uint64_t d2) {
  uint64_t shape[3] = {d0, d1, d2};
  return u->src.upload(u->src.ctx, u->L->dev, name, to, shape, ndim, dst);
}

/* Qwen3-Next's in_proj_qkvz [nk, (dk | dk | r*dv | r*dv), H] and in_proj_ba [nk, (r | r), H]
 * into dst in the order [q | k | v | z | b | a], through a staging buffer. */
static metrale_status up_next_in_proj(upload_ctx *u, gpu_ptr dst) {
  metrale_qwen3_ssm_layer *L = u->L;
  const qwen3_ssm_dims *d = &L->d;
  const uint64_t row = (uint64_t)d->H * 2, nq = (uint64_t)d->nk * (2 * d->dk + 2 * d->r * d->dv);
  gpu_ptr tmp = 0;
  METRALE_RETURN_IF_ERROR(metrale_alloc(L->dev, (uint64_t)d->P * row, &tmp));
  metrale_status s = up(u, "linear_attn.in_proj_qkvz.weight", METRALE_DTYPE_BF16, tmp, 2, nq, d->H, 0);
  if (!s) s = up(u, "linear_attn.in_proj_ba.weight", METRALE_DTYPE_BF16, tmp + nq * row, 2, 2ull * d->nv, d->H, 0);
  gpu_backend *be = metrale_device_backend(L->dev);
  const uint64_t dk = d->dk, rdv = (uint64_t)d->r * d->dv, r = d->r, nk = d->nk, nv = d->nv;
  const uint64_t C = d->C, Z = (uint64_t)nv * d->dv;
  for (uint64_t h = 0; h < nk && !s; h++) {
    const gpu_ptr g = tmp + h * (2 * dk + 2 * rdv) * row, ba = tmp + (nq + h * 2 * r) * row;
    /* (destination row, source, rows) for this key head's q, k, v, z, b, a */
    const struct {
      uint64_t to;
      gpu_ptr from;
      uint64_t n;
    } part[6] = {{h * dk, g, dk},
                 {nk * dk + h * dk, g + dk * row, dk},
                 {2 * nk * dk + h * rdv, g + 2 * dk * row, rdv},
                 {C + h * rdv, g + (2 * dk + rdv) * row, rdv},
                 {C + Z + h * r, ba, r},
                 {C + Z + nv + h * r, ba + r * row, r}};
    for (int i = 0; i < 6 && !s; i++) s = be->vt->copy_d2d(be, dst + part[i].to * row, part[i].from, part[i].n * row, NULL);
  }
  metrale_status w = be->vt->stream_sync(be, NULL); /* before the staging buffer goes */
  metrale_free(L->dev, tmp);
  if (s) {
    metrale_status_free(w);
    return s;
  }
  return w;
}

/* in_proj16 [rows, H] = in_proj's first rows in IEEE half, through a host buffer a block of
 * rows at a time.  bf16 converts exactly for 2^-17 <= |w| < 65520 (smaller values keep their
 * top bits); a weight at or past 65520 (or not finite) has no half, and then the layer keeps
 * its f32-x projections (L->f16_off says why; the copy's bytes stay unused in the weight
 * block) rather than run on infinities. */
static metrale_status make_in_proj16(metrale_qwen3_ssm_layer *L, uint64_t rows) {
  enum { BLOCK = 1u << 19 }; /* elements a round trip: 1 MiB of bf16 */
  gpu_backend *be = metrale_device_backend(L->dev);
  const uint64_t n = rows * L->d.H;
  uint16_t *buf = malloc(BLOCK * sizeof *buf);
  if (!buf) return METRALE_ERROR(OUT_OF_MEMORY, "in_proj fp16 staging buffer");
  metrale_status s = METRALE_OK;
  for (uint64_t at = 0; at < n && !s && !L->f16_off[0]; at += BLOCK) {
    const uint64_t c = n - at < BLOCK ? n - at : BLOCK;
    s = be->vt->copy_d2h(be, buf, L->w.in_proj + 2 * at, 2 * c, NULL);
    if (!s) s = be->vt->stream_sync(be, NULL);
    for (uint64_t i = 0; i < c && !s; i++) {
      const float v = metrale_bf16_to_f32(buf[i]);
      if (!(v > -65520.0f && v < 65520.0f)) {
        snprintf(L->f16_off, sizeof L->f16_off, "in_proj row %llu holds %g, beyond IEEE half's range",
                 (unsigned long long)((at + i) / L->d.H), (double)v);
        break;
      }
      buf[i] = metrale_f32_to_f16(v);
    }
    if (!s && !L->f16_off[0]) s = be->vt->copy_h2d(be, L->w.in_proj16 + 2 * at, buf, 2 * c, NULL);
    if (!s) s = be->vt->stream_sync(be, NULL); /* before buf is refilled */
  }
  free(buf);
  if (!s && L->f16_off[0]) L->w.in_proj16 = 0;
  return s;
}

metrale_status qwen3_ssm_load_weights(metrale_qwen3_ssm_layer *L, metrale_weight_source src) {
  const qwen3_ssm_dims *d = &L->d;
  const uint64_t H = d->H, bf = 2;
  carve c = {0};
  uint64_t o_in_norm = take(&c, H * bf), o_post_norm = take(&c, H * bf);
  uint64_t o_in_proj = take(&c, (uint64_t)d->P * H * bf);
  uint64_t o_conv = take(&c, (uint64_t)d->C * d->K * bf);
  uint64_t o_alog = take(&c, d->nv * 4ull), o_dt = take(&c, d->nv * bf);
  uint64_t o_gnorm = take(&c, d->dv * bf);
  uint64_t o_out = take(&c, H * d->nv * d->dv * bf);
  const uint64_t rows16 = d->P; /* all of in_proj: q|k|v, z, b, a */
  /* the prefill may take gemm_f16_ws for q|k|v and z, a decode batch past the gemv's rows its
   * forms for all of in_proj (mixer.c), where the backend has the kernels and their speed; the
   * weights' range is checked when they are converted */
  const int want16 = metrale_ops_has_f16_proj(&L->ops);
  const uint64_t o_in_proj16 = want16 ? take(&c, rows16 * H * 2) : 0;
  uint64_t o_mlp_gu = 0, o_mlp_down = 0, o_router = 0, o_egu = 0, o_edown = 0, o_sgu = 0, o_sdown = 0;
  if (L->moe) {
    o_router = take(&c, (uint64_t)(d->E + 1) * H * bf);
    o_egu = take(&c, (uint64_t)d->E * 2 * d->mI * H * bf);
    o_edown = take(&c, (uint64_t)d->E * H * d->mI * bf);
    o_sgu = take(&c, 2ull * d->sI * H * bf);
    o_sdown = take(&c, H * d->sI * bf);
  } else {
    o_mlp_gu = take(&c, 2ull * d->I * H * bf);
    o_mlp_down = take(&c, H * d->I * bf);
  }
  metrale_status s = metrale_alloc(L->dev, c.used, &L->weight_block);
  if (s) return metrale_status_annotate(s, "layer weights (%.1f MB)", (double)c.used / 1e6);
  L->weight_bytes = c.used;
  gpu_ptr base = L->weight_block;
  qwen3_ssm_weights *w = &L->w;
  w->in_norm = base + o_in_norm;
  w->post_norm = base + o_post_norm;
  w->in_proj = base + o_in_proj;
  w->conv = base + o_conv;
  w->a_log = base + o_alog;
  w->dt_bias = base + o_dt;
  w->gnorm = base + o_gnorm;
  w->out_proj = base + o_out;
  w->in_proj16 = want16 ? base + o_in_proj16 : 0;

  upload_ctx u = {L, src};
  const metrale_dtype B = METRALE_DTYPE_BF16;
  const uint64_t nvdv = (uint64_t)d->nv * d->dv;
  METRALE_RETURN_IF_ERROR(up(&u, "input_layernorm.weight", B, w->in_norm, 1, H, 0, 0));
  METRALE_RETURN_IF_ERROR(up(&u, "post_attention_layernorm.weight", B, w->post_norm, 1, H, 0, 0));
  if (L->qwen35) {
    gpu_ptr p = w->in_proj;
    METRALE_RETURN_IF_ERROR(up(&u, "linear_attn.in_proj_qkv.weight", B, p, 2, d->C, H, 0));
    p += (uint64_t)d->C * H * bf;
    METRALE_RETURN_IF_ERROR(up(&u, "linear_attn.in_proj_z.weight", B, p, 2, nvdv, H, 0));
    p += nvdv * H * bf;
    METRALE_RETURN_IF_ERROR(up(&u, "linear_attn.in_proj_b.weight", B, p, 2, d->nv, H, 0));
    p += (uint64_t)d->nv * H * bf;
    METRALE_RETURN_IF_ERROR(up(&u, "linear_attn.in_proj_a.weight", B, p, 2, d->nv, H, 0));
  } else {
    METRALE_RETURN_IF_ERROR(up_next_in_proj(&u, w->in_proj));
  }
  if (w->in_proj16) METRALE_RETURN_IF_ERROR(make_in_proj16(L, rows16));
  METRALE_RETURN_IF_ERROR(up(&u, "linear_attn.conv1d.weight", B, w->conv, 3, d->C, 1, d->K));
  METRALE_RETURN_IF_ERROR(up(&u, "linear_attn.A_log", METRALE_DTYPE_F32, w->a_log, 1, d->nv, 0, 0));
  METRALE_RETURN_IF_ERROR(up(&u, "linear_attn.dt_bias", B, w->dt_bias, 1, d->nv, 0, 0));
  METRALE_RETURN_IF_ERROR(up(&u, "linear_attn.norm.weight", B, w->gnorm, 1, d->dv, 0, 0));
  METRALE_RETURN_IF_ERROR(up(&u, "linear_attn.out_proj.weight", B, w->out_proj, 2, H, nvdv, 0));

  if (!L->moe) {
    w->mlp_gate_up = base + o_mlp_gu;
    w->mlp_down = base + o_mlp_down;
    METRALE_RETURN_IF_ERROR(up(&u, "mlp.gate_proj.weight", B, w->mlp_gate_up, 2, d->I, H, 0));
    METRALE_RETURN_IF_ERROR(
        up(&u, "mlp.up_proj.weight", B, w->mlp_gate_up + (uint64_t)d->I * H * bf, 2, d->I, H, 0));
    METRALE_RETURN_IF_ERROR(up(&u, "mlp.down_proj.weight", B, w->mlp_down, 2, H, d->I, 0));
    return METRALE_OK;
  }
  w->router = base + o_router;
  w->exp_gate_up = base + o_egu;
  w->exp_down = base + o_edown;
  w->sh_gate_up = base + o_sgu;
  w->sh_down = base + o_sdown;
  METRALE_RETURN_IF_ERROR(up(&u, "mlp.gate.weight", B, w->router, 2, d->E, H, 0));
  METRALE_RETURN_IF_ERROR(
      up(&u, "mlp.shared_expert_gate.weight", B, w->router + (uint64_t)d->E * H * bf, 2, 1, H, 0));
  const uint64_t mat = (uint64_t)d->mI * H * bf; /* one [mI, H] or [H, mI] matrix */
  char name[128];
  for (uint32_t e = 0; e < d->E; e++) {
    gpu_ptr gu = w->exp_gate_up + 2 * mat * e;
    snprintf(name, sizeof name, "mlp.experts.%u.gate_proj.weight", e);
    METRALE_RETURN_IF_ERROR(up(&u, name, B, gu, 2, d->mI, H, 0));
    snprintf(name, sizeof name, "mlp.experts.%u.up_proj.weight", e);
    METRALE_RETURN_IF_ERROR(up(&u, name, B, gu + mat, 2, d->mI, H, 0));
    snprintf(name, sizeof name, "mlp.experts.%u.down_proj.weight", e);
    METRALE_RETURN_IF_ERROR(up(&u, name, B, w->exp_down + mat * e, 2, H, d->mI, 0));
  }
  METRALE_RETURN_IF_ERROR(up(&u, "mlp.shared_expert.gate_proj.weight", B, w->sh_gate_up, 2, d->sI, H, 0));
  METRALE_RETURN_IF_ERROR(up(&u, "mlp.shared_expert.up_proj.weight", B,
                             w->sh_gate_up + (uint64_t)d->sI * H * bf, 2, d->sI, H, 0));
  METRALE_RETURN_IF_ERROR(up(&u, "mlp.shared_expert.down_proj.weight", B, w->sh_down, 2, H, d->sI, 0));
  return METRALE_OK;
}
