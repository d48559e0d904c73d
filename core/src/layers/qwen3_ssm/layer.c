/* Layer creation and the two entry points, prefill and decode. */
#include <stdlib.h>
#include <string.h>

#include "layer.h"

/* Largest T accepted in one call: keeps every [T, width] index inside 32 bits. */
#define MAX_ROW_ELEMS (1ull << 31)

static metrale_status derive_dims(const metrale_qwen3_config *c, uint32_t layer, int moe,
                                  qwen3_ssm_dims *d) {
  if (c->nk == 0 || c->nv == 0 || c->dk == 0 || c->dv == 0 || c->hidden_size == 0 || c->conv_kernel == 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "config has a zero head count, head size, hidden size or conv width");
  if (c->nv % c->nk)
    return METRALE_ERROR(INVALID_ARGUMENT, "linear_num_value_heads (%u) is not a multiple of "
                         "linear_num_key_heads (%u)", c->nv, c->nk);
  memset(d, 0, sizeof *d);
  d->H = c->hidden_size;
  d->nk = c->nk;
  d->nv = c->nv;
  d->dk = c->dk;
  d->dv = c->dv;
  d->r = c->nv / c->nk;
  d->C = 2 * c->nk * c->dk + c->nv * c->dv;
  d->K = c->conv_kernel;
  d->P = d->C + c->nv * c->dv + 2 * c->nv; /* same width for both families' layouts */
  d->eps = c->rms_norm_eps;
  if (moe) {
    if (c->num_experts_per_tok == 0 || c->num_experts_per_tok > c->num_experts || c->moe_intermediate_size == 0)
      return METRALE_ERROR(INVALID_ARGUMENT, "layer %u is MoE but num_experts_per_tok / "
                           "moe_intermediate_size are not usable", layer);
    if (c->shared_expert_intermediate_size == 0)
      return METRALE_ERROR(UNIMPLEMENTED, "layer %u: MoE without a shared expert is not supported", layer);
    d->E = c->num_experts;
    d->topk = c->num_experts_per_tok;
    d->mI = c->moe_intermediate_size;
    d->sI = c->shared_expert_intermediate_size;
  } else {
    if (c->intermediate_size == 0)
      return METRALE_ERROR(INVALID_ARGUMENT, "layer %u is dense but intermediate_size is 0", layer);
    d->I = c->intermediate_size;
  }
  return METRALE_OK;
}

metrale_status metrale_qwen3_ssm_layer_create(metrale_device *dev, const metrale_qwen3_config *cfg,
                                              uint32_t layer_index, metrale_weight_source weights,
                                              metrale_qwen3_ssm_layer **out_layer) {
  if (layer_index >= cfg->num_hidden_layers || layer_index >= METRALE_MAX_LAYERS)
    return METRALE_ERROR(NOT_FOUND, "layer %u does not exist (the model has %u layers)", layer_index,
                         cfg->num_hidden_layers);
  if (!cfg->linear_layer[layer_index])
    return METRALE_ERROR(INVALID_ARGUMENT, "layer %u is a full-attention layer; metrale runs the "
                         "linear-attention (Gated DeltaNet) layers", layer_index);
  metrale_qwen3_ssm_layer *L = calloc(1, sizeof *L);
  if (!L) return METRALE_ERROR(OUT_OF_MEMORY, "layer object");
  L->dev = dev;
  L->cfg = *cfg;
  L->layer_index = layer_index;
  L->qwen35 = cfg->family == METRALE_QWEN3_5;
  L->moe = metrale_config_layer_is_moe(cfg, layer_index);
  metrale_status s = derive_dims(cfg, layer_index, L->moe, &L->d);
  if (!s) s = metrale_ops_init(&L->ops, dev);
  if (!s) s = qwen3_ssm_load_weights(L, weights);
  gpu_backend *be = metrale_device_backend(dev);
  if (!s && L->moe) { /* the router's count (0 between launches) and the shared expert's stream */
    s = metrale_alloc(dev, 4, &L->router_count);
    if (!s) s = be->vt->memset(be, L->router_count, 0, 4, NULL);
    if (!s) s = be->vt->stream_sync(be, NULL);
    if (!s && be->vt->stream_wait) {
      s = be->vt->stream_create(be, &L->side);
      L->has_side = !s;
    }
  }
  if (s) {
    metrale_qwen3_ssm_layer_destroy(L);
    return metrale_status_annotate(s, "creating layer %u", layer_index);
  }
  *out_layer = L;
  return METRALE_OK;
}

void metrale_qwen3_ssm_layer_destroy(metrale_qwen3_ssm_layer *L) {
  if (!L) return;
  gpu_backend *be = metrale_device_backend(L->dev);
  metrale_status_free(be->vt->sync(be));
  qwen3_ssm_graphs_clear(L);
  if (L->has_side) be->vt->stream_destroy(be, L->side);
  metrale_free(L->dev, L->router_count);
  metrale_free(L->dev, L->scratch_block);
  metrale_free(L->dev, L->delta_ws);
  metrale_free(L->dev, L->weight_block);
  free(L->lists_host);
  free(L);
}

void metrale_qwen3_ssm_layer_set_second_stream(metrale_qwen3_ssm_layer *L, int on) {
  if (L->side_off == !on) return;
  gpu_backend *be = metrale_device_backend(L->dev);
  metrale_status_free(be->vt->sync(be)); /* nothing recorded or queued for the old form runs on */
  L->side_off = !on;
  qwen3_ssm_graphs_clear(L); /* the recordings fork, or do not, as they were made */
}

int metrale_qwen3_ssm_layer_uses_second_stream(const metrale_qwen3_ssm_layer *L) { return qwen3_ssm_uses_side(L); }

uint64_t metrale_qwen3_ssm_layer_weight_bytes(const metrale_qwen3_ssm_layer *L) { return L->weight_bytes; }
int metrale_qwen3_ssm_layer_is_moe(const metrale_qwen3_ssm_layer *L) { return L->moe; }

typedef const char *(*gemm_path_fn)(const metrale_ops *o, uint32_t m, uint32_t n, uint32_t k);

/* The most decode rows (up to 16) a projection of n columns, k deep, still takes on a gemv; 0 if
 * none.  The batches shown below skip the threshold, which depends on the weight's size. */
static uint32_t gemv_rows(gemm_path_fn path, const metrale_ops *o, uint32_t n, uint32_t k) {
  uint32_t last = 0;
  for (uint32_t m = 1; m <= 16; m++)
    if (strncmp(path(o, m, n, k), "gemv", 4) == 0) last = m;
  return last;
}

/* One projection's kernels at decode batch 1, 8, 64 and 256 (n columns) and at a 4096-token
 * prefill (n_prefill columns), k deep, and up to which batch the gemv runs. */
static void describe_gemm(FILE *out, const char *label, gemm_path_fn path, const metrale_ops *o, uint32_t n,
                          uint32_t n_prefill, uint32_t k) {
  static const uint32_t rows[] = {1, 8, 64, 256, 4096};
  fprintf(out, "  %-31s", label);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    fprintf(out, "%sgemm.%s", i ? " / " : "", path(o, rows[i], rows[i] == 4096 ? n_prefill : n, k));
  const uint32_t g = gemv_rows(path, o, n, k);
  if (g) fprintf(out, " (gemv to batch %u)", g);
  fputc('\n', out);
}

/* Whether a 4096-token prefill takes the one in_proj launch with mixed in IEEE half for the
 * half conv (mixer.c).  have16: the layer has its fp16 in_proj.  The scratch is 256-byte
 * aligned: 0 stands for its pointers. */
static int audit_mixed_half(const metrale_ops *o, const qwen3_ssm_dims *d, int have16) {
  return have16 && qwen3_ssm_one_in_proj(o, d, 4096) && metrale_ops_mixed_half_fits(o, 0, 0, 4096, d->C, d->dk);
}
/* And whether its conv hands v to the fp16 core in IEEE half too (one sequence, a workspace). */
static int audit_v_half(const metrale_ops *o, const qwen3_ssm_dims *d, int have16) {
  return audit_mixed_half(o, d, have16) && metrale_ops_v_half_fits(o, 0, 256, 4096, 1, d->dk, d->dv);
}
/* And q and k to the whole-head core's planes in IEEE half too (stand-in aligned addresses). */
static int audit_qk_planes(const metrale_ops *o, const qwen3_ssm_dims *d, int have16) {
  return audit_v_half(o, d, have16) && metrale_ops_qk_planes_fits(o, 256, 256, 256, 4096, 1, d->nv, d->dk, d->dv);
}

/* in_proj at decode 1, 8, 64 and 256 (all P rows: fp16 x where the layer has in_proj16 and
 * an fp16 GEMM takes the batch, mixer.c) and at a 4096-token prefill: all of it in one
 * GEMM (gemm_f16_ws_cols3) where the layer takes that, else its q|k|v (describe_prefill_proj
 * names the rest). */
static void describe_in_proj(const metrale_ops *o, const qwen3_ssm_dims *d, int have16, FILE *out) {
  static const uint32_t rows[] = {1, 8, 64, 256};
  fprintf(out, "  %-31s", "in_proj:");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const char *f16 = have16 ? metrale_ops_gemm_f16_path(o, rows[i], d->P, d->H) : NULL;
    fprintf(out, "%sgemm.%s", i ? " / " : "", f16 ? f16 : metrale_ops_gemm_f32in_path(o, rows[i], d->P, d->H));
  }
  if (have16 && qwen3_ssm_one_in_proj(o, d, 4096))
    fprintf(out, " / gemm.%s (all of it)", audit_mixed_half(o, d, have16) ? "gemm_f16_ws_cols3q" : "gemm_f16_ws_cols3");
  else
    fprintf(out, " / gemm.%s (its q|k|v)",
            have16 && metrale_ops_f16_gemm_fits(o, 4096, d->C, d->H) ? "gemm_f16_ws"
                                                                      : metrale_ops_gemm_f32in_path(o, 4096, d->C, d->H));
  const uint32_t g = gemv_rows(metrale_ops_gemm_f32in_path, o, d->P, d->H);
  if (g) fprintf(out, " (gemv to batch %u)", g);
  fputc('\n', out);
  uint32_t from = 0;
  for (uint32_t t = 1; t <= 4096 && have16 && !from; t++)
    if (metrale_ops_f16_gemm_fits(o, t, d->P, d->H)) from = t;
  if (from) fprintf(out, "    (decode from %u tokens: fp16 x from elementwise.f32_to_f16, in_proj in fp16)\n", from);
}

/* The kernels the projections of these shapes take.  have16: as describe_prefill_proj's. */
static void describe_projections(const metrale_ops *o, const qwen3_ssm_dims *d, int moe, int have16, FILE *out) {
  const uint32_t nvdv = d->nv * d->dv;
  fprintf(out, "  projections at decode 1 / 8 / 64 / 256 / prefill 4096:\n");
  describe_in_proj(o, d, have16, out);
  if (moe) describe_gemm(out, "router logits:", metrale_ops_gemm_f32_path, o, d->E + 1, d->E + 1, d->H);
  describe_gemm(out, "out_proj:", metrale_ops_gemm_path, o, d->H, d->H, nvdv);
  metrale_kernel_id split[METRALE_K_COUNT];
  const size_t n_split = metrale_ops_gemm_ws_split_kernels(o, split, METRALE_K_COUNT);
  fprintf(out, "  GEMMs of few 128x256 tiles, K split over a cluster:");
  for (size_t i = 0; i < n_split; i++) fprintf(out, " gemm.%s", metrale_kernel_info_get(split[i])->name);
  fprintf(out, "%s\n", n_split ? "" : " none in this backend");
}

/* q|k|v, z (and b|a) at a 4096-token prefill.  have16: the layer has its fp16 in_proj (a shape
 * without weights is taken as convertible); f16_off: why not, where the weights said so. */
static void describe_prefill_proj(const metrale_ops *o, const qwen3_ssm_dims *d, int have16, const char *f16_off,
                                  FILE *out) {
  const uint32_t nvdv = d->nv * d->dv;
  static const char f16[] = "gemm_f16_ws (fp16 x from elementwise.f32_to_f16, in_proj in fp16)";
  if (have16 && qwen3_ssm_one_in_proj(o, d, 4096)) {
    const int half = audit_mixed_half(o, d, have16);
    fprintf(out, "  %-31sgemm.%s (one launch into mixed%s, z and [b | a]; fp16 x from "
                 "elementwise.f32_to_f16, in_proj in fp16), then gdn.gates_ba\n", "q|k|v, z, b|a, prefill 4096:",
            half ? "gemm_f16_ws_cols3q" : "gemm_f16_ws_cols3",
            !half ? "" : audit_v_half(o, d, have16) ? " in IEEE half, for conv.conv1d_prefill_l2norm_xhv"
                                                    : " in IEEE half, for conv.conv1d_prefill_l2norm_xh");
    return;
  }
  fprintf(out, "  %-31sgemm.%s\n", "q|k|v, prefill 4096:",
          have16 && metrale_ops_f16_gemm_fits(o, 4096, d->C, d->H) ? f16 : metrale_ops_gemm_f32in_path(o, 4096, d->C, d->H));
  if (have16 && metrale_ops_f16_gemm_fits(o, 4096, nvdv, d->H)) {
    fprintf(out, "  z projection, prefill 4096:    gemm.%s\n", f16);
  } else {
    const char *z_path = metrale_ops_gemm_z_path(o, 4096, nvdv, d->H);
    fprintf(out, "  z projection, prefill 4096:    gemm.%s%s\n", z_path,
            strcmp(z_path, "gemm_f32in_hi_ws") == 0 ? " (x rounded to bf16 on the 128x256 tiles)" : "");
  }
  if (!have16 && metrale_ops_has_f16_proj(o) && f16_off[0])
    fprintf(out, "    (no fp16 in_proj in this layer: %s)\n", f16_off);
}

/* The layer's input norm at a 4096-token prefill and decode 256: straight into fp16 where the
 * mixer reads x only so (layer.c qwen3_ssm_forward). */
static void describe_input_norm(const metrale_ops *o, const qwen3_ssm_dims *d, int have16, FILE *out) {
  static const char f16[] = "rmsnorm_f16 (fp16 x for in_proj)", f32[] = "rmsnorm_f32";
  const int has = metrale_ops_has_rmsnorm_f16(o);
  fprintf(out, "  input norm, prefill 4096 / decode 256 (part=layer): norm.%s / norm.%s\n",
          has && qwen3_ssm_takes_x16(o, d, have16, 4096, 0) ? f16 : f32,
          has && qwen3_ssm_takes_x16(o, d, have16, 256, 1) ? f16 : f32);
}

/* The decode mixer's kernels between the projections (the audit's layer and shape). */
static void describe_decode(const metrale_ops *o, const qwen3_ssm_dims *d, FILE *out) {
  if (!metrale_ops_has_gdn_decode_fused(o)) {
    fprintf(out, "  decode, split .. gated norm:   six kernels (no fused kernel)\n");
    return;
  }
  fprintf(out, "  decode, split .. gated norm:   one kernel: %s\n",
          metrale_ops_gdn_decode_path(o, d->nk, d->nv, d->dk, d->dv));
}

/* The gate and up projection of a dense or shared expert of width i at decode 1 and 8 (the
 * path's text is one buffer: a line each). */
static void describe_gate_up(const metrale_ops *o, const char *label, uint32_t i, uint32_t h, FILE *out) {
  static const uint32_t tokens[] = {1, 8};
  for (size_t j = 0; j < sizeof tokens / sizeof tokens[0]; j++)
    fprintf(out, "%s (width %u), decode %u: %s\n", label, i, tokens[j], metrale_ops_gate_up_silu_path(o, tokens[j], i, h));
}

/* The FFN's chunks (ffn.c): a prefill's FFN runs on this many tokens at a time. */
static void describe_ffn_chunk(const metrale_ops *o, const qwen3_ssm_dims *d, int moe, FILE *out) {
  fprintf(out, "  FFN, prefill:                  in chunks of %u tokens%s\n", qwen3_ssm_ffn_chunk(o, d, moe),
          moe ? " (where the grouped expert kernels run, each reads every routed expert's weights once a chunk)" : "");
}

/* The MoE FFN's kernels, the routed experts' at the audit's decode batches and prefills. */
static void describe_moe(const metrale_ops *o, const qwen3_ssm_dims *d, FILE *out) {
  static const uint32_t tokens[] = {1, 8, 64, 256, 4096, 16384};
  const uint32_t chunk = qwen3_ssm_ffn_chunk(o, d, 1); /* ffn.c's */
  fprintf(out, "  MoE: %u experts, top %u, width %u, shared %u: the router's top-k, the routed experts, moe.%s\n",
          d->E, d->topk, d->mI, d->sI, metrale_ops_kernel_or(o, METRALE_K_moe_combine_wide, METRALE_K_moe_combine));
  for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
    const uint32_t tc = tokens[i] < chunk ? tokens[i] : chunk;
    const char *fused = metrale_ops_router_topk_path(o, tc, d->E + 1, d->E);
    fprintf(out, "    top-k and routed experts, %s %5u:   %s; %s\n", tokens[i] >= 4096 ? "prefill" : "decode ",
            tokens[i], fused ? fused : metrale_ops_moe_topk_kernel(o, tc, d->E),
            metrale_ops_moe_path(o, tc * d->topk, d->topk, d->E, d->H, d->mI));
  }
  describe_gate_up(o, "    shared expert's gate and up", d->sI, d->H, out);
}

metrale_status metrale_qwen3_ssm_describe_shape(metrale_device *dev, const metrale_qwen3_config *cfg,
                                                uint32_t layer_index, FILE *out) {
  const int moe = metrale_config_layer_is_moe(cfg, layer_index);
  qwen3_ssm_dims d;
  METRALE_RETURN_IF_ERROR(derive_dims(cfg, layer_index, moe, &d));
  metrale_ops ops;
  METRALE_RETURN_IF_ERROR(metrale_ops_init(&ops, dev));
  fprintf(out, "  hidden %u, %u key / %u value heads of %u/%u, conv %u, %s FFN\n", d.H, d.nk, d.nv, d.dk, d.dv,
          d.K, moe ? "MoE" : "dense");
  describe_projections(&ops, &d, moe, 1, out);
  describe_prefill_proj(&ops, &d, 1, "", out);
  describe_input_norm(&ops, &d, 1, out);
  describe_decode(&ops, &d, out);
  fprintf(out, "  delta rule, prefill:           %s\n",
          metrale_ops_delta_rule_prefill_path(&ops, d.dk, d.dv, audit_v_half(&ops, &d, 1)));
  describe_ffn_chunk(&ops, &d, moe, out);
  if (moe) describe_moe(&ops, &d, out);
  return METRALE_OK;
}

void metrale_qwen3_ssm_layer_describe(const metrale_qwen3_ssm_layer *L, FILE *out) {
  const qwen3_ssm_dims *d = &L->d;
  const metrale_ops *o = &L->ops;
  fprintf(out, "  layer %u (%s, %s FFN): hidden %u, %u key / %u value heads of %u/%u, conv %u\n",
          L->layer_index, L->qwen35 ? "Qwen3.5" : "Qwen3-Next", L->moe ? "MoE" : "dense", d->H, d->nk,
          d->nv, d->dk, d->dv, d->K);
  describe_projections(o, d, L->moe, L->w.in_proj16 != 0, out);
  fprintf(out, "  bf16 GEMMs of 65+ rows, few 128x128 tiles: gemm.%s%s\n",
          metrale_ops_kernel_or(o, METRALE_K_gemm_bf16_t128_splitk, METRALE_K_gemm_bf16_splitk),
          o->k[METRALE_K_gemm_bf16_t128_splitk] && o->k[METRALE_K_gemm_bf16_t128_splitk4]
              ? " (gemm.gemm_bf16_t128_splitk4 where its clusters of 8 would not all be resident)"
              : "");
  fprintf(out, "  GEMMs of <= 200 64x64 tiles:   gemm.%s / gemm.%s\n",
          metrale_ops_kernel_or(o, METRALE_K_gemm_f32in_splitk, METRALE_K_gemm_f32in),
          metrale_ops_kernel_or(o, METRALE_K_gemm_bf16_splitk, METRALE_K_gemm_bf16));
  if (qwen3_ssm_graphs_used(L))
    fprintf(out, "  decode step:                   recorded once per batch and buffers, then replayed as a graph "
                 "(%u kept, the least recently replayed replaced after %u steps idle)\n",
            QWEN3_SSM_GRAPHS, QWEN3_SSM_GRAPH_IDLE);
  else
    fprintf(out, "  decode step:                   %s\n",
            metrale_device_has_graphs(L->dev) ? "launched eagerly (graphs turned off)"
                                              : "launched eagerly (the backend has no graphs)");
  describe_decode(o, d, out);
  fprintf(out, "  input projection, prefill:     four GEMMs into q|k|v, z, b, a (in_proj rows in the "
               "Qwen3.5 order for both families)\n");
  describe_prefill_proj(o, d, L->w.in_proj16 != 0, L->f16_off, out);
  describe_input_norm(o, d, L->w.in_proj16 != 0, out);
  fprintf(out, "  input split, decode:           gdn.split_qkvzba35 (without the fused kernel)\n");
  fprintf(out, "  conv, decode / prefill:        conv.conv1d_update / %s\n",
          metrale_ops_conv1d_prefill_path(o, audit_mixed_half(o, d, L->w.in_proj16 != 0),
                                          audit_v_half(o, d, L->w.in_proj16 != 0),
                                          audit_qk_planes(o, d, L->w.in_proj16 != 0)));
  fprintf(out, "  delta rule, decode / prefill:  gdn.delta_rule_decode / %s\n",
          metrale_ops_delta_rule_prefill_path(o, d->dk, d->dv, audit_v_half(o, d, L->w.in_proj16 != 0)));
  fprintf(out, "  q/k l2norm / gated norm:       gdn.%s%s / norm.%s\n",
          metrale_ops_kernel_or(o, METRALE_K_l2norm_qk_rows, METRALE_K_l2norm_qk),
          o->k[METRALE_K_conv1d_prefill_l2norm] ? " (decode; prefill: in the conv's pass)" : "",
          metrale_ops_kernel_or(o, METRALE_K_gated_rmsnorm_rows, METRALE_K_gated_rmsnorm));
  fprintf(out, "  residual + post-attn norm:     %s\n", metrale_ops_add_rmsnorm_path(o));
  describe_ffn_chunk(o, d, L->moe, out);
  if (L->moe) {
    describe_moe(o, d, out);
    fprintf(out, "    shared expert's stream:      %s\n",
            qwen3_ssm_uses_side(L) ? "a second one, beside the routed experts (stream_wait)"
            : L->has_side          ? "the layer's own (the second stream turned off)"
                                   : "the layer's own, after the routed experts (the backend has no stream_wait)");
  } else
    describe_gate_up(o, "  dense MLP's gate and up", d->I, d->H, out);
}

/* Widest row any scratch buffer has, to bound T. */
static uint64_t widest(const qwen3_ssm_dims *d) {
  uint64_t w = d->P;
  if (d->H > w) w = d->H;
  if (2ull * d->I > w) w = 2ull * d->I;
  return w;
}

/* Puts the slot list (and cu_seqlens) on the device, unless the device already holds
 * exactly these lists from the last call: a decode loop over a fixed batch then issues
 * only kernel launches, with no copy.  A new list is queued from the next entry of the
 * host ring (the caller's lists may die when we return, and a queued copy reads its source
 * when it runs); the host waits for the device only when that entry's last copy may still
 * be queued, once every QWEN3_SSM_LIST_RING new lists.  s.slots and s.cu stay where they
 * are, so recorded decode steps read whatever list was copied last before them. */
_Static_assert(QWEN3_SSM_LIST_RING == 16, "qwen3_ssm.h tells callers the ring holds 16 lists");
static metrale_status upload_lists(metrale_qwen3_ssm_layer *L, const int32_t *cu, const int32_t *slots,
                                   uint32_t S, int decode, gpu_stream st) {
  const uint64_t stride = 2ull * L->scratch_seqs + 1;
  const int32_t *newest = L->lists_host + L->lists_at * stride;
  if (L->lists_n == S && L->lists_decode == decode && memcmp(newest, slots, S * sizeof *slots) == 0 &&
      (decode || memcmp(newest + S, cu, (S + 1ull) * sizeof *cu) == 0))
    return METRALE_OK;
  gpu_backend *be = metrale_device_backend(L->dev);
  if (L->lists_queued >= QWEN3_SSM_LIST_RING) {
    /* the next entry's copy may still be queued, on this stream or another */
    METRALE_RETURN_IF_ERROR(be->vt->sync(be));
    L->lists_queued = 0;
  }
  const uint32_t at = (L->lists_at + 1) % QWEN3_SSM_LIST_RING;
  int32_t *entry = L->lists_host + at * stride;
  memcpy(entry, slots, S * sizeof *slots);
  if (!decode) memcpy(entry + S, cu, (S + 1ull) * sizeof *cu);
  L->lists_at = at;
  L->lists_queued++;
  L->lists_n = 0; /* unknown until both copies are queued */
  METRALE_RETURN_IF_ERROR(be->vt->copy_h2d(be, L->s.slots, entry, (uint64_t)S * 4, st));
  if (!decode) METRALE_RETURN_IF_ERROR(be->vt->copy_h2d(be, L->s.cu, entry + S, (S + 1ull) * 4, st));
  L->lists_n = S;
  L->lists_decode = decode;
  return METRALE_OK;
}

static metrale_status run(metrale_qwen3_ssm_layer *L, metrale_state_pool *pool, metrale_part part,
                          const int32_t *cu, const int32_t *slots, uint32_t S, uint32_t T, int decode,
                          gpu_ptr x, gpu_ptr y, gpu_stream st) {
  metrale_state_dims want = metrale_state_dims_of(&L->cfg), have = metrale_state_pool_dims(pool);
  if (memcmp(&want, &have, sizeof want) != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "state pool was made for another layer shape");
  if (part != METRALE_PART_MIXER && part != METRALE_PART_LAYER)
    return METRALE_ERROR(INVALID_ARGUMENT, "unknown part %d", (int)part);
  if (!x || !y || x == y) return METRALE_ERROR(INVALID_ARGUMENT, "input and output must be distinct buffers");
  METRALE_RETURN_IF_ERROR(metrale_state_pool_check_slots(pool, slots, S));
  if (T == 0) return METRALE_OK;
  if ((uint64_t)T * widest(&L->d) >= MAX_ROW_ELEMS)
    return METRALE_ERROR(INVALID_ARGUMENT, "%u tokens in one call is too many for this layer; split the call", T);
  METRALE_RETURN_IF_ERROR(qwen3_ssm_scratch_reserve(L, T, S));
  if (!decode) METRALE_RETURN_IF_ERROR(qwen3_ssm_delta_ws_reserve(L, T, S));

  /* From here on the call may touch state; everything above was checked first. */
  METRALE_RETURN_IF_ERROR(upload_lists(L, cu, slots, S, decode, st));

  if (decode) return qwen3_ssm_decode_step(L, pool, part, x, y, S, st);
  return qwen3_ssm_forward(L, pool, part, x, y, T, S, decode, st);
}

metrale_status qwen3_ssm_forward(metrale_qwen3_ssm_layer *L, metrale_state_pool *pool, metrale_part part,
                                 gpu_ptr x, gpu_ptr y, uint32_t T, uint32_t S, int decode, gpu_stream st) {
  const qwen3_ssm_scratch *s = &L->s;
  if (part == METRALE_PART_MIXER) return qwen3_ssm_mixer(L, pool, x, y, T, S, decode, 0, st);
  const qwen3_ssm_dims *d = &L->d;
  /* the input norm straight into fp16 where the mixer reads x only so (norm.rmsnorm_f16) */
  if (metrale_ops_has_rmsnorm_f16(&L->ops) && qwen3_ssm_mixer_takes_x16(L, T, decode)) {
    METRALE_RETURN_IF_ERROR(
        op_rmsnorm_f16(&L->ops, st, qwen3_ssm_mixer_x16(L, decode), x, L->w.in_norm, T, d->H, d->eps));
    METRALE_RETURN_IF_ERROR(qwen3_ssm_mixer(L, pool, 0, s->mix_out, T, S, decode, 1, st));
  } else {
    METRALE_RETURN_IF_ERROR(op_rmsnorm_f32(&L->ops, st, s->xn, x, L->w.in_norm, T, d->H, d->eps));
    METRALE_RETURN_IF_ERROR(qwen3_ssm_mixer(L, pool, s->xn, s->mix_out, T, S, decode, 0, st));
  }
  METRALE_RETURN_IF_ERROR(op_add_rmsnorm(&L->ops, st, s->h, s->hn, x, s->mix_out, L->w.post_norm, T,
                                         d->H, d->eps));
  return qwen3_ssm_ffn(L, y, s->h, s->hn, T, st);
}

metrale_status metrale_qwen3_ssm_prefill(metrale_qwen3_ssm_layer *L, metrale_state_pool *pool,
                                         metrale_part part, const int32_t *cu_seqlens,
                                         const int32_t *slots, uint32_t n_seqs, gpu_ptr x,
                                         gpu_ptr y, gpu_stream stream) {
  if (n_seqs == 0) return METRALE_OK;
  if (!cu_seqlens) return METRALE_ERROR(INVALID_ARGUMENT, "prefill needs cu_seqlens");
  if (cu_seqlens[0] != 0) return METRALE_ERROR(INVALID_ARGUMENT, "cu_seqlens[0] must be 0, got %d", cu_seqlens[0]);
  for (uint32_t i = 0; i < n_seqs; i++)
    if (cu_seqlens[i + 1] < cu_seqlens[i])
      return METRALE_ERROR(INVALID_ARGUMENT, "cu_seqlens decreases at %u (%d -> %d)", i, cu_seqlens[i],
                           cu_seqlens[i + 1]);
  return run(L, pool, part, cu_seqlens, slots, n_seqs, (uint32_t)cu_seqlens[n_seqs], 0, x, y, stream);
}

metrale_status metrale_qwen3_ssm_decode(metrale_qwen3_ssm_layer *L, metrale_state_pool *pool,
                                        metrale_part part, const int32_t *slots, uint32_t batch,
                                        gpu_ptr x, gpu_ptr y, gpu_stream stream) {
  if (batch == 0) return METRALE_OK;
  return run(L, pool, part, NULL, slots, batch, batch, 1, x, y, stream);
}
