/* The CPU reference kernels: the executable form of the contracts in kernels.def.
 *
 * Each manifest kernel <id> has a thunk cpu_k_<id>(args) that unpacks the launch
 * arguments in signature order and calls a typed function below.  The backend's
 * dispatch table names every thunk through the X-macro, so a kernel added to the
 * manifest without a CPU implementation is a link error, not a runtime surprise.
 *
 * Conventions: bf16 storage (metrale_bf16), fp32 accumulation, bf16 results rounded to
 * nearest even with metrale_f32_to_bf16.  Work is split over rows/heads/slots with
 * OpenMP.  Grid and block sizes of a launch are ignored: a CPU kernel covers the whole
 * problem. */
#ifndef METRALE_CPU_KERNELS_H
#define METRALE_CPU_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "metrale/bf16.h"
#include "metrale/gpu_backend.h"
#include "metrale/manifest.h"
#include "metrale/status.h"

/* Thunks return a status (not void) so that a kernel needing scratch memory reports
 * OUT_OF_MEMORY, and shapes a kernel cannot honour (nv not a multiple of nk, a
 * zero conv width) are INVALID_ARGUMENT instead of a division by zero. */
typedef metrale_status (*cpu_kernel_fn)(const gpu_arg *args);

#define METRALE_KERNEL(id, module, block, sig, req, fallback, contract) \
  metrale_status cpu_k_##id(const gpu_arg *args);
#include "metrale/kernels.def"
#undef METRALE_KERNEL

/* The whole-head kernels' q/k planes (kernels.def delta_rule_prefill_chunked_wh_prep; the layout in
 * kernel_bounds.h) of s sequences (cu_seqlens cu), dk = 128: put writes them from the q and k
 * heads at the start of each token's row of qk (ld floats apart), rounded to IEEE half, zero
 * past each sequence's end; get widens them back into those rows. */
void cpu_wh_planes_put(unsigned char *ws, const float *qk, size_t ld, const int32_t *cu, uint32_t s, uint32_t nk);
void cpu_wh_planes_get(float *qk, size_t ld, const unsigned char *ws, const int32_t *cu, uint32_t s, uint32_t nk);

/* Argument unpacking for the thunks (kinds were checked against the manifest). */
static inline void *cpu_arg_p(const gpu_arg *args, int i) {
  return (void *)(uintptr_t)args[i].v.ptr;
}
static inline uint32_t cpu_arg_u(const gpu_arg *args, int i) { return args[i].v.u32; }
static inline float cpu_arg_f(const gpu_arg *args, int i) { return args[i].v.f32; }

static inline float cpu_bf(metrale_bf16 h) { return metrale_bf16_to_f32(h); }
static inline metrale_bf16 cpu_to_bf(float f) { return metrale_f32_to_bf16(f); }
static inline float cpu_silu(float x) { return x / (1.0f + expf(-x)); }
static inline float cpu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* ---- norm.c ---------------------------------------------------------------------- */
/* x, y [rows, n]; w [n] applied as (1 + w). */
void cpu_rmsnorm(metrale_bf16 *y, const metrale_bf16 *x, const metrale_bf16 *w, uint32_t rows,
                 uint32_t n, float eps);
/* As cpu_rmsnorm, but y is f32 and not rounded (the mixer's input). */
void cpu_rmsnorm_f32(float *y, const metrale_bf16 *x, const metrale_bf16 *w, uint32_t rows,
                     uint32_t n, float eps);
/* As cpu_rmsnorm_f32, each value then rounded to IEEE half (metrale_f32_to_f16). */
void cpu_rmsnorm_f16(uint16_t *y, const metrale_bf16 *x, const metrale_bf16 *w, uint32_t rows, uint32_t n,
                     float eps);
/* h = bf16(a + b); y = rmsnorm(h).  All [rows, n]. */
void cpu_add_rmsnorm(metrale_bf16 *h, metrale_bf16 *y, const metrale_bf16 *a, const metrale_bf16 *b,
                     const metrale_bf16 *w, uint32_t rows, uint32_t n, float eps);
/* o, y bf16 and z f32 [rows = T*nv, n = dv]; w [n] used as is. */
void cpu_gated_rmsnorm(metrale_bf16 *y, const metrale_bf16 *o, const float *z,
                       const metrale_bf16 *w, uint32_t rows, uint32_t n, float eps);

/* ---- elementwise.c --------------------------------------------------------------- */
void cpu_add(metrale_bf16 *y, const metrale_bf16 *a, const metrale_bf16 *b, uint32_t n);
/* gu [rows, 2n] = (gate | up); y [rows, n]. */
void cpu_silu_mul(metrale_bf16 *y, const metrale_bf16 *gu, uint32_t rows, uint32_t n);

/* ---- gemm.c ---------------------------------------------------------------------- */
/* y[m, n] = sum_k x[m, k] * w[n, k]: x [M, K], w [N, K]; y bf16 or f32 [M, N]. */
metrale_status cpu_gemm_bf16(metrale_bf16 *y, const metrale_bf16 *x, const metrale_bf16 *w,
                             uint32_t m, uint32_t n, uint32_t k);
metrale_status cpu_gemm_bf16_f32(float *y, const metrale_bf16 *x, const metrale_bf16 *w, uint32_t m,
                                 uint32_t n, uint32_t k);
/* Routed rows: row j < r computes y[j, :] = w[idx[j]] . x[j / x_div] with w bf16
 * [E, n, k], x bf16 [r / x_div, k], y bf16 or f32 (y_f32) [r, n].  Rows are grouped by
 * expert so that each expert's weights are read once.  A negative idx gives zeros. */
metrale_status cpu_expert_gemm(void *y, int y_f32, const metrale_bf16 *x, uint32_t x_div,
                               const int32_t *idx, uint32_t r, const metrale_bf16 *w, uint32_t n,
                               uint32_t k);
/* Counting sort of routed rows by expert, stable: rows[start[x] .. start[x+1]) are the ids j
 * with idx[j] == x in increasing order (start [e+1]; ids outside [0, e) are left out, so
 * start[e] rows are listed). */
void cpu_rows_by_expert(uint32_t *start, uint32_t *rows, const int32_t *idx, uint32_t r, uint32_t e);
/* The same products for the rows a moe_sort list names (kernels.def moe_gate_up_sorted):
 * for each slot (e, p, m) of tiles [ceil(r/64) + experts + 1, 3], rows perm[p .. p+m).
 * Rows not listed are not written; a list that names rows or experts out of range is an
 * invalid argument. */
metrale_status cpu_expert_gemm_sorted(void *y, int y_f32, const metrale_bf16 *x, uint32_t x_div,
                                      const int32_t *perm, const int32_t *tiles, uint32_t r, uint32_t e,
                                      const metrale_bf16 *w, uint32_t n, uint32_t k);

/* ---- gdn.c ----------------------------------------------------------------------- */
/* The mixer's path from the input projection to the recurrence is f32 (kernels.def,
 * "Precision"): p, mixed, z, b, a, the conv output and qkv are f32; o is bf16. */
void cpu_split_qkvzba35(float *mixed, float *z, float *b, float *a, const float *p, uint32_t t,
                        uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv);
/* x f32 [T, ld]: the 2*nk heads of width dk at the start of each row, in place. */
void cpu_l2norm_qk(float *x, uint32_t t, uint32_t nk, uint32_t dk, uint32_t ld);
/* n = T*nv gate values; a, b f32. */
void cpu_gates(float *g, float *beta, const float *a, const float *b, const float *a_log,
               const metrale_bf16 *dt_bias, uint32_t n, uint32_t nv);
/* Decode: one token per slot, B = bsz. */
metrale_status cpu_delta_rule_decode(metrale_bf16 *o, const float *qkv, const float *g,
                                     const float *beta, float *state, const int32_t *slots,
                                     uint32_t bsz, uint32_t nk, uint32_t nv, uint32_t dk,
                                     uint32_t dv);
/* Prefill: S sequences given by cu_seqlens [S+1]. */
metrale_status cpu_delta_rule_prefill(metrale_bf16 *o, const float *qkv, const float *g,
                                      const float *beta, float *state, const int32_t *cu_seqlens,
                                      const int32_t *slots, uint32_t s, uint32_t nk, uint32_t nv,
                                      uint32_t dk, uint32_t dv);

/* ---- conv.c ---------------------------------------------------------------------- */
/* x, y f32 [T, C] (y not rounded to bf16); w bf16 [C, K]; state f32. */
void cpu_conv1d_prefill(float *y, const float *x, const metrale_bf16 *w, float *state,
                        const int32_t *cu_seqlens, const int32_t *slots, uint32_t s, uint32_t c,
                        uint32_t kw);
void cpu_conv1d_update(float *y, const float *x, const metrale_bf16 *w, float *state,
                       const int32_t *slots, uint32_t bsz, uint32_t c, uint32_t kw);

/* ---- moe.c ----------------------------------------------------------------------- */
void cpu_moe_topk(int32_t *idx, float *w, const float *logits, uint32_t t, uint32_t e, uint32_t ld,
                  uint32_t k, uint32_t norm);
metrale_status cpu_moe_gate_up(metrale_bf16 *gu, const metrale_bf16 *x, const int32_t *idx,
                               const metrale_bf16 *w, uint32_t r, uint32_t k, uint32_t h,
                               uint32_t n);
metrale_status cpu_moe_down(float *y, const metrale_bf16 *act, const int32_t *idx,
                            const metrale_bf16 *w, uint32_t r, uint32_t h, uint32_t n);
void cpu_moe_combine(metrale_bf16 *out, const metrale_bf16 *res, const float *y, const float *w,
                     const metrale_bf16 *shared, const float *gate, uint32_t t, uint32_t k,
                     uint32_t h, uint32_t ld, uint32_t col);

#endif
