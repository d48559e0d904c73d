/* Launch wrappers: one typed function per manifest kernel, with the grid geometry its
 * contract (kernels.def) fixes.  The layer calls these, never metrale_launch directly.
 *
 * metrale_ops holds the kernel handles a caller resolved once: required kernels through
 * metrale_kernel, optional ones through metrale_try_kernel (0 = absent).  Where an
 * optional kernel has a fallback, the wrapper takes it, so callers see one op. */
#ifndef METRALE_OPS_H
#define METRALE_OPS_H

#include "metrale/device.h"

typedef struct metrale_ops {
  metrale_device *dev;
  gpu_kernel k[METRALE_K_COUNT];
  int wh_nseg; /* METRALE_WH_SEGMENTS: the segments the whole-head scan takes (0 none), -1 its own choice */
  int wh_w0;   /* METRALE_WH_SEG0: segment 0's length in sixteenths of each other's (1..64), 0 its own choice */
} metrale_ops;

/* Resolves every manifest kernel: REQUIRED ones must exist (error naming the first
 * missing one), OPTIONAL ones may be 0. */
metrale_status metrale_ops_init(metrale_ops *ops, metrale_device *dev);

/* The kernel a wrapper will use for an op, for the layer's description. */
const char *metrale_ops_gemm_path(const metrale_ops *ops, uint32_t m, uint32_t n, uint32_t k);
const char *metrale_ops_gemm_f32_path(const metrale_ops *ops, uint32_t m, uint32_t n, uint32_t k);
const char *metrale_ops_gemm_f32in_path(const metrale_ops *ops, uint32_t m, uint32_t n, uint32_t k);
const char *metrale_ops_gemm_z_path(const metrale_ops *ops, uint32_t m, uint32_t n, uint32_t k);
/* the fp16 GEMM's kernel (op_gemm_f16), or NULL where metrale_ops_f16_gemm_fits says no */
const char *metrale_ops_gemm_f16_path(const metrale_ops *ops, uint32_t m, uint32_t n, uint32_t k);
/* The GEMM family kernels with K split over a cluster of warp-specialised tiles that the
 * backend has, in manifest order: writes up to cap of them to ids, returns how many. */
size_t metrale_ops_gemm_ws_split_kernels(const metrale_ops *ops, metrale_kernel_id *ids, size_t cap);
/* For the audit: the name of `fast` when the backend has it, else of `fallback` (the
 * kernel the op then takes). */
const char *metrale_ops_kernel_or(const metrale_ops *ops, metrale_kernel_id fast, metrale_kernel_id fallback);
const char *metrale_ops_add_rmsnorm_path(const metrale_ops *ops);

metrale_status op_rmsnorm(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                          uint32_t rows, uint32_t n, float eps);
/* y f32 = rmsnorm(x)(1 + w): the mixer's input. */
metrale_status op_rmsnorm_f32(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                              uint32_t rows, uint32_t n, float eps);
/* y IEEE half [rows, n]: op_rmsnorm_f32's values rounded as f32_to_f16 rounds them, in one launch
 * (norm.rmsnorm_f16, where metrale_ops_has_rmsnorm_f16). */
int metrale_ops_has_rmsnorm_f16(const metrale_ops *ops);
metrale_status op_rmsnorm_f16(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                              uint32_t rows, uint32_t n, float eps);
/* h = a + b, y = rmsnorm(h)(1 + w); fused kernel or add + rmsnorm. */
metrale_status op_add_rmsnorm(const metrale_ops *o, gpu_stream st, gpu_ptr h, gpu_ptr y, gpu_ptr a,
                              gpu_ptr b, gpu_ptr w, uint32_t rows, uint32_t n, float eps);
metrale_status op_gated_rmsnorm(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x,
                                gpu_ptr z, gpu_ptr w, uint32_t rows, uint32_t n, float eps);
metrale_status op_add(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr a, gpu_ptr b,
                      uint64_t n);
metrale_status op_silu_mul(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr gu, uint32_t rows,
                           uint32_t n);
/* act bf16 [T, I] = bf16(silu(x . w[0:I]^T) * (x . w[I:2I]^T)), x bf16 [T, H], w bf16 [2I, H]
 * (gate rows then up rows): the dense and shared experts' first half.  Up to 12 rows in one
 * launch of moe_gate_up_silu_rows (its sums not rounded to bf16 before the silu), else the
 * gemm into gu bf16 [T, 2I] and silu_mul. */
metrale_status op_gate_up_silu(const metrale_ops *o, gpu_stream st, gpu_ptr act, gpu_ptr gu, gpu_ptr x, gpu_ptr w,
                               uint32_t t, uint32_t i, uint32_t h);
/* its kernels (in a buffer of the calling thread's that the next call overwrites) */
const char *metrale_ops_gate_up_silu_path(const metrale_ops *o, uint32_t t, uint32_t i, uint32_t h);
/* y bf16 [M,N] = x [M,K] . w [N,K]^T; gemv for small M when the backend has it. */
metrale_status op_gemm(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                       uint32_t m, uint32_t n, uint32_t k);
/* y f32 [M,N]: the same with fp32 output (gemv_bf16_f32 for small M when present). */
metrale_status op_gemm_f32(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                           uint32_t m, uint32_t n, uint32_t k);
/* y f32 [M,N] = x f32 [M,K] . w bf16 [N,K]^T (gemv_f32in for small M when present). */
metrale_status op_gemm_f32in(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                             uint32_t m, uint32_t n, uint32_t k);
/* The z projection: as op_gemm_f32in, except that where the backend has gemm_f32in_hi_ws
 * and the shape takes the 128x256 tiles, x is rounded to bf16 (one product, not two);
 * z does not feed the recurrence (docs/numerics.md). */
metrale_status op_gemm_f32in_z(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                               uint32_t m, uint32_t n, uint32_t k);
/* A projection on IEEE half operands (gemm_f16_ws and its split forms, docs/numerics.md): whether
 * the backend has the kernels and a GEMM of m x n (k deep) takes their tiles, by the rule of the
 * other ws tiles: the 128x256 pairs where they fill half the SMs, else, above the rows the f32-x
 * gemv takes, the split forms where those do (ws_split_pick). */
int metrale_ops_f16_gemm_fits(const metrale_ops *ops, uint32_t m, uint32_t n, uint32_t k);
/* Whether the layer should keep fp16 weights for those projections: the backend has both
 * kernels and says they are fast (GPU_CAP_F16_TENSOR). */
int metrale_ops_has_f16_proj(const metrale_ops *ops);
/* y fp16 [n] = x f32 [n] (elementwise.f32_to_f16) */
metrale_status op_f32_to_f16(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, uint32_t n);
/* y f32 [M,N] = x fp16 [M,K] . w fp16 [N,K]^T on gemm_f16_ws or a split form (where
 * metrale_ops_f16_gemm_fits; where no form takes the shape, an INTERNAL error) */
metrale_status op_gemm_f16(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                           uint32_t m, uint32_t n, uint32_t k);
/* The prefill's whole in_proj in one GEMM on IEEE half operands, its columns into three
 * outputs (gemm_f16_ws_cols3: q|k|v, z, then b|a for gates_ba): whether the backend has both
 * kernels and an fp16 GEMM of m x (n0 + n1 + n2), k deep, applies (metrale_ops_f16_gemm_fits).
 * cols3 runs whole-K 128x256 pairs also where that GEMM alone would take a split form: at 64
 * tokens its one launch beat three GEMMs on f32 x (docs/perf-decode.md section 26). */
int metrale_ops_f16_in_proj_fits(const metrale_ops *ops, uint32_t m, uint32_t n0, uint32_t n1, uint32_t n2,
                                 uint32_t k);
/* Whether the prefill hands mixed from in_proj to the conv in IEEE half: the backend has both
 * gemm_f16_ws_cols3q and conv1d_prefill_l2norm_xh, and the conv's pass fits the shape (as
 * op_conv1d_prefill_l2norm's one pass: y = qkv, x = mixed, t tokens of c channels). */
int metrale_ops_mixed_half_fits(const metrale_ops *ops, gpu_ptr y, gpu_ptr x, uint32_t t, uint32_t c, uint32_t dk);
/* p = x fp16 [M,K] . w fp16 [n0+n1+n2, K]^T into y0 f32 [M,n0], y1 [M,n1], y2 [M,n2]
 * (where metrale_ops_f16_in_proj_fits); y0_half: y0 in IEEE half by gemm_f16_ws_cols3q (where
 * metrale_ops_mixed_half_fits) */
metrale_status op_gemm_f16_cols3(const metrale_ops *o, gpu_stream st, gpu_ptr y0, gpu_ptr y1, gpu_ptr y2, gpu_ptr x,
                                 gpu_ptr w, uint32_t m, uint32_t n0, uint32_t n1, uint32_t n2, uint32_t k,
                                 int y0_half);
/* p f32 [T, P] in the order [q | k | v | z | b | a] (kernels.def split_qkvzba35) into its
 * pieces. */
metrale_status op_split(const metrale_ops *o, gpu_stream st, gpu_ptr mixed, gpu_ptr z, gpu_ptr b,
                        gpu_ptr a, gpu_ptr p, uint32_t t, uint32_t nk, uint32_t nv, uint32_t dk,
                        uint32_t dv);
/* The conv prefill over s sequences of t tokens in all (t = cu_seqlens[s]):
 * conv.conv1d_prefill_tiled (blocks of 64 tokens) when the backend has it, else the
 * per-sequence conv.conv1d_prefill.  The path string describes op_conv1d_prefill_l2norm's, or
 * with mixed_half its x_half form's, with v_half too its vh form's, with qk_planes too its planes form's
 * (the layer's audit). */
const char *metrale_ops_conv1d_prefill_path(const metrale_ops *ops, int mixed_half, int v_half, int qk_planes);
metrale_status op_conv1d_prefill(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                                 gpu_ptr state, gpu_ptr cu_seqlens, gpu_ptr slots, uint32_t t,
                                 uint32_t s, uint32_t c, uint32_t kw);
/* Whether the prefill also hands v from the conv to the fp16 core's phase 0 in IEEE half, as vh
 * [t, nv*dv] (16-byte aligned): where mixed goes in half (the caller checks
 * metrale_ops_mixed_half_fits), the backend has conv1d_prefill_l2norm_xhv and
 * delta_rule_prefill_chunked_f16_prep_vh, and op_delta_rule_prefill takes the fp16 chunked
 * kernel for these s sequences with workspace ws. */
int metrale_ops_v_half_fits(const metrale_ops *ops, gpu_ptr vh, gpu_ptr ws, uint32_t t, uint32_t s, uint32_t dk,
                            uint32_t dv);
/* The conv prefill, then the l2norm of y's q and k heads (ld = c): one pass
 * (conv.conv1d_prefill_l2norm) when the backend has it and the shape fits it, else
 * op_conv1d_prefill and op_l2norm_qk.  x_half: x is IEEE half [t, c] (gemm_f16_ws_cols3q's y0),
 * taken by conv.conv1d_prefill_l2norm_xh, which only runs where metrale_ops_mixed_half_fits
 * (else INVALID_ARGUMENT: there is no other conv on half input).  vh != 0 (with x_half): the
 * value channels to vh IEEE half [t, c - 2*nk*dk] instead of y, by conv1d_prefill_l2norm_xhv
 * (where metrale_ops_v_half_fits, for op_delta_rule_prefill's vh).  planes != 0 (with vh): q and k in
 * IEEE half into the whole-head core's q/k planes at planes (its workspace) instead of y, which is not
 * written, by conv1d_prefill_l2norm_qkh (where metrale_ops_qk_planes_fits, for op_delta_rule_prefill's
 * qk_planes). */
metrale_status op_conv1d_prefill_l2norm(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                                        gpu_ptr state, gpu_ptr cu_seqlens, gpu_ptr slots, uint32_t t,
                                        uint32_t s, uint32_t c, uint32_t kw, uint32_t nk, uint32_t dk, int x_half,
                                        gpu_ptr vh, gpu_ptr planes);
metrale_status op_conv1d_update(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr x, gpu_ptr w,
                                gpu_ptr state, gpu_ptr slots, uint32_t bsz, uint32_t c, uint32_t kw);
metrale_status op_l2norm_qk(const metrale_ops *o, gpu_stream st, gpu_ptr x, uint32_t t, uint32_t nk,
                            uint32_t dk, uint32_t ld);
metrale_status op_gates(const metrale_ops *o, gpu_stream st, gpu_ptr g, gpu_ptr beta, gpu_ptr a,
                        gpu_ptr b, gpu_ptr a_log, gpu_ptr dt_bias, uint32_t n, uint32_t nv);
/* g and beta [T, nv] from b and a side by side, ba f32 [T, 2nv] rows [b | a] (gdn.gates_ba,
 * which the caller checked the backend has) */
metrale_status op_gates_ba(const metrale_ops *o, gpu_stream st, gpu_ptr g, gpu_ptr beta, gpu_ptr ba,
                           gpu_ptr a_log, gpu_ptr dt_bias, uint32_t t, uint32_t nv);
/* A prefill's gates from its input: b and a = x f32 [T, H] . w_ba^T (w_ba bf16 [2nv, H], in_proj's
 * b rows then its a rows), then g and beta [T, nv] as op_gates.  ba is f32 scratch of 2*T*nv:
 * one GEMM into rows [b | a] and gates_ba where the backend has it, else two GEMMs into its
 * halves (b [T, nv], then a [T, nv]) and gates. */
metrale_status op_ba_gates(const metrale_ops *o, gpu_stream st, gpu_ptr g, gpu_ptr beta, gpu_ptr ba,
                           gpu_ptr x, gpu_ptr w_ba, gpu_ptr a_log, gpu_ptr dt_bias, uint32_t t, uint32_t nv,
                           uint32_t h);
metrale_status op_delta_rule_decode(const metrale_ops *o, gpu_stream st, gpu_ptr out, gpu_ptr qkv,
                                    gpu_ptr g, gpu_ptr beta, gpu_ptr state, gpu_ptr slots,
                                    uint32_t bsz, uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv);
/* The delta-rule prefill over s sequences of t tokens in all: gdn_chunked.
 * delta_rule_prefill_chunked (two launches) when the backend has it, the heads fit its
 * contract, the sequences average 64 tokens or more (32 where the fp16 chunked kernel runs)
 * and ws (metrale_ops_delta_rule_ws_bytes of device scratch, 0 when the chunked kernel would
 * not be used) is given; else the sequential gdn.delta_rule_prefill. */
uint64_t metrale_ops_delta_rule_ws_bytes(const metrale_ops *ops, uint32_t t, uint32_t s,
                                         uint32_t nv, uint32_t dk, uint32_t dv);
/* The path string; v_half: op_delta_rule_prefill's with vh (metrale_ops_v_half_fits). */
const char *metrale_ops_delta_rule_prefill_path(const metrale_ops *ops, uint32_t dk, uint32_t dv, int v_half);
/* Whether the prefill hands q and k from the conv to the whole-head core in IEEE half, in the q/k
 * planes at the start of its workspace ws (kernels.def delta_rule_prefill_chunked_wh_prep): the backend
 * has conv1d_prefill_l2norm_qkh and delta_rule_prefill_chunked_wh_prep_qkh, and op_delta_rule_prefill
 * takes the whole-head kernel (in segments or not) for these sequences with v in half at vh and o at
 * out.  METRALE_NO_QK_PLANES=1 takes it out (metrale_ops_init). */
int metrale_ops_qk_planes_fits(const metrale_ops *ops, gpu_ptr out, gpu_ptr vh, gpu_ptr ws, uint32_t t, uint32_t s,
                               uint32_t nv, uint32_t dk, uint32_t dv);
/* vh != 0: v from vh IEEE half [t, nv*dv] (conv1d_prefill_l2norm_xhv's), not from qkv, by
 * delta_rule_prefill_chunked_f16_prep_vh's phase 0 (INVALID_ARGUMENT unless
 * metrale_ops_v_half_fits).  qk_planes: q and k are already in ws's q/k planes (conv1d_prefill_l2norm_qkh
 * wrote them; qkv is not read), phase 0 by delta_rule_prefill_chunked_wh_prep_qkh (INVALID_ARGUMENT
 * unless metrale_ops_qk_planes_fits). */
metrale_status op_delta_rule_prefill(const metrale_ops *o, gpu_stream st, gpu_ptr out, gpu_ptr qkv,
                                     gpu_ptr g, gpu_ptr beta, gpu_ptr state, gpu_ptr cu_seqlens,
                                     gpu_ptr slots, gpu_ptr ws, uint32_t t, uint32_t s, uint32_t nk,
                                     uint32_t nv, uint32_t dk, uint32_t dv, gpu_ptr vh, int qk_planes);
/* The decode mixer between the projections in one launch (kernels.def gdn_decode_fused35):
 * y bf16 [B, nv*dv] from p f32 [B, P] in the order [q | k | v | z | b | a], updating both
 * states of each slot.  NOT_FOUND when the backend lacks it: the caller then runs the
 * chain (metrale_ops_has_gdn_decode_fused says which).  Small batches of the Qwen head size
 * take gdn_decode_cluster35 where the backend has it, larger ones gdn_decode_pair35 (its r = 4
 * form gdn_decode_pair35_r4 at four value heads a key head). */
int metrale_ops_has_gdn_decode_fused(const metrale_ops *ops);
/* The kernels the fused decode takes for these heads, by batch (text for the audit); NULL
 * without a fused kernel. */
const char *metrale_ops_gdn_decode_path(const metrale_ops *ops, uint32_t nk, uint32_t nv, uint32_t dk,
                                        uint32_t dv);
metrale_status op_gdn_decode_fused(const metrale_ops *o, gpu_stream st, gpu_ptr y,
                                   gpu_ptr p, gpu_ptr conv_w, gpu_ptr conv_state, gpu_ptr a_log,
                                   gpu_ptr dt_bias, gpu_ptr norm_w, gpu_ptr state, gpu_ptr slots,
                                   uint32_t bsz, uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv,
                                   uint32_t kw, float eps);
metrale_status op_moe_topk(const metrale_ops *o, gpu_stream st, gpu_ptr idx, gpu_ptr w, gpu_ptr logits,
                           uint32_t t, uint32_t e, uint32_t ld, uint32_t k, uint32_t norm);
metrale_status op_moe_gate_up(const metrale_ops *o, gpu_stream st, gpu_ptr gu, gpu_ptr x, gpu_ptr idx,
                              gpu_ptr w, uint32_t r, uint32_t k, uint32_t h, uint32_t n);
metrale_status op_moe_down(const metrale_ops *o, gpu_stream st, gpu_ptr y, gpu_ptr act, gpu_ptr idx,
                           gpu_ptr w, uint32_t r, uint32_t h, uint32_t n);
/* The routed experts' buffers for R = T*k rows: idx i32 [R] (moe_topk), perm i32 [R] and
 * tiles i32 [metrale_moe_slots(R, E), 3] (moe_sort's lists), gu bf16 [R, 2mI], act bf16
 * [R, mI], y f32 [R, H] (or bf16: op_moe_experts). */
typedef struct metrale_moe_buffers {
  gpu_ptr idx, perm, tiles, gu, act, y;
} metrale_moe_buffers;
/* y[j] = down_e(silu(gate_e(x[j/k])) * up_e(x[j/k])), e = idx[j]: grouped GEMMs by expert
 * (moe_sort and the _sorted projections) where they are provided, k <= E and the rows are
 * at least a few an expert; else 32 lanes a weight row (moe_gate_up_silu_rows, moe_down_rows) or
 * a block a routed row.  y is bf16 where
 * metrale_ops_moe_y_bf16 (then pass that to op_moe_combine), else f32. */
metrale_status op_moe_experts(const metrale_ops *o, gpu_stream st, const metrale_moe_buffers *b, gpu_ptr x,
                              gpu_ptr w_gate_up, gpu_ptr w_down, uint32_t r, uint32_t k, uint32_t h, uint32_t mi,
                              uint32_t e);
/* (in a buffer of the calling thread's that the next call overwrites) */
const char *metrale_ops_moe_path(const metrale_ops *o, uint32_t r, uint32_t k, uint32_t e, uint32_t h, uint32_t mi);
/* Whether op_moe_experts writes y in bf16 for these shapes: the grouped path on
 * moe_down_sorted_ws_bf16, with moe_combine_wide_bf16 to read it. */
int metrale_ops_moe_y_bf16(const metrale_ops *o, uint32_t r, uint32_t k, uint32_t e, uint32_t h, uint32_t mi);
/* The bytes of the y and gu buffers op_moe_experts writes for exactly r rows (gu: 0 where the
 * path makes act without it). */
typedef struct metrale_moe_bytes {
  uint64_t y, gu;
} metrale_moe_bytes;
metrale_moe_bytes metrale_ops_moe_need(const metrale_ops *o, uint32_t r, uint32_t k, uint32_t e, uint32_t h,
                                       uint32_t mi);
/* The most of each that any r <= rmax rows need (the scratch's size for a chunk of rmax rows). */
metrale_moe_bytes metrale_ops_moe_bytes(const metrale_ops *o, uint32_t rmax, uint32_t k, uint32_t e, uint32_t h,
                                        uint32_t mi);
/* logits f32 [m, n] = x . wr^T (x bf16 [m, h]), then op_moe_topk on them (e experts, ld n):
 * one launch (moe_router_topk_rows) where it fits, else op_gemm_f32 and op_moe_topk.  count:
 * a device u32 that is 0 (and is 0 again after the launch), or 0 where there is none. */
metrale_status op_moe_router_topk(const metrale_ops *o, gpu_stream st, gpu_ptr logits, gpu_ptr idx, gpu_ptr w,
                                  gpu_ptr x, gpu_ptr wr, gpu_ptr count, uint32_t m, uint32_t n, uint32_t h,
                                  uint32_t e, uint32_t k, uint32_t norm);
/* The kernel op_moe_router_topk launches for these shapes when it is one launch, else NULL. */
const char *metrale_ops_router_topk_path(const metrale_ops *o, uint32_t m, uint32_t n, uint32_t e);
/* The router top-k kernel op_moe_topk launches for t tokens of e experts ("module.kernel"). */
const char *metrale_ops_moe_topk_kernel(const metrale_ops *o, uint32_t t, uint32_t e);
/* y_bf16: y is bf16 (metrale_ops_moe_y_bf16), else f32 */
metrale_status op_moe_combine(const metrale_ops *o, gpu_stream st, gpu_ptr out, gpu_ptr res, gpu_ptr y,
                              gpu_ptr w, gpu_ptr shared, gpu_ptr gate, uint32_t t, uint32_t k,
                              uint32_t h, uint32_t ld, uint32_t col, int y_bf16);

#endif
