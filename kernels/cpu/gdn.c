/* gdn module: projection splits, q/k l2norm, gates and the gated delta rule. */
#include "cpu_kernels.h"

#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void cpu_split_qkvzba35(float *mixed, float *z, float *b, float *a, const float *p, uint32_t t,
                        uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv) {
  size_t c = 2 * (size_t)nk * dk + (size_t)nv * dv;
  size_t zw = (size_t)nv * dv;
  size_t width = c + zw + 2 * (size_t)nv; /* [q | k | v | z | b | a] */
#pragma omp parallel for schedule(static)
  for (int64_t tok = 0; tok < (int64_t)t; tok++) {
    const float *row = p + (size_t)tok * width;
    memcpy(mixed + (size_t)tok * c, row, c * sizeof *row);
    memcpy(z + (size_t)tok * zw, row + c, zw * sizeof *row);
    memcpy(b + (size_t)tok * nv, row + c + zw, nv * sizeof *row);
    memcpy(a + (size_t)tok * nv, row + c + zw + nv, nv * sizeof *row);
  }
}

void cpu_l2norm_qk(float *x, uint32_t t, uint32_t nk, uint32_t dk, uint32_t ld) {
  float q_scale = 1.0f / sqrtf((float)dk);
  int64_t heads = (int64_t)t * 2 * nk;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < heads; i++) {
    int64_t tok = i / (2 * nk), hh = i % (2 * nk);            /* hh < nk: q head, else k head */
    float *v = x + (size_t)tok * ld + (size_t)hh * dk; /* [dk] */
    float ss = 0.0f;
    for (uint32_t j = 0; j < dk; j++) ss += v[j] * v[j];
    float scale = 1.0f / sqrtf(ss + 1e-6f);
    if (hh < nk) scale *= q_scale;
    for (uint32_t j = 0; j < dk; j++) v[j] *= scale;
  }
}

static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* The gates of one (token, value head h): g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b). */
static inline void gate(float *g, float *beta, float a, float b, float a_log, metrale_bf16 dt_bias) {
  *g = -expf(a_log) * softplus(a + cpu_bf(dt_bias));
  *beta = cpu_sigmoid(b);
}

void cpu_gates(float *g, float *beta, const float *a, const float *b, const float *a_log,
               const metrale_bf16 *dt_bias, uint32_t n, uint32_t nv) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < (int64_t)n; i++) {
    int64_t h = i % nv; /* i = (token, value head) */
    gate(&g[i], &beta[i], a[i], b[i], a_log[h], dt_bias[h]);
  }
}

/* One token of one value head on S [dk,dv]:
 *   S *= exp(g); d = beta * (v - k^T S); S += k d^T; o = q^T S.
 * kd is scratch [dv]. */
static void delta_step(float *S, metrale_bf16 *o, const float *q, const float *k, const float *v,
                       float g, float beta, uint32_t dk, uint32_t dv,
                       float *kd) {
  float decay = expf(g);
  for (uint32_t j = 0; j < dv; j++) kd[j] = 0.0f;
  for (uint32_t i = 0; i < dk; i++) {
    float *Si = S + (size_t)i * dv;
    float ki = k[i];
    for (uint32_t j = 0; j < dv; j++) {
      Si[j] *= decay;
      kd[j] += ki * Si[j]; /* (k^T S)[j] */
    }
  }
  for (uint32_t j = 0; j < dv; j++) kd[j] = beta * (v[j] - kd[j]); /* d */
  float *out = kd + dv; /* [dv] accumulators for o */
  for (uint32_t j = 0; j < dv; j++) out[j] = 0.0f;
  for (uint32_t i = 0; i < dk; i++) {
    float *Si = S + (size_t)i * dv;
    float ki = k[i], qi = q[i];
    for (uint32_t j = 0; j < dv; j++) {
      Si[j] += ki * kd[j];
      out[j] += qi * Si[j];
    }
  }
  for (uint32_t j = 0; j < dv; j++) o[j] = cpu_to_bf(out[j]);
}

/* Per-thread scratch: a private state [dk,dv] for slot -1 plus 2*dv vectors. */
static metrale_status scratch_alloc(float **out, int *out_per, uint32_t dk, uint32_t dv) {
  size_t per = (size_t)dk * dv + 2 * (size_t)dv + 16;
  float *s = malloc(per * sizeof(float) * (size_t)omp_get_max_threads());
  if (!s) return METRALE_ERROR(OUT_OF_MEMORY, "delta rule scratch for %u x %u state", dk, dv);
  *out = s;
  *out_per = (int)per;
  return METRALE_OK;
}

static size_t conv_width(uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv) {
  return 2 * (size_t)nk * dk + (size_t)nv * dv; /* C */
}

/* Runs tokens [t0, t1) of one sequence on value head h from state slot; token t's v of the
 * head at v + t*ldv + h*dv (qkv's value columns: v = qkv + 2*nk*dk, ldv = C). */
static void delta_sequence(metrale_bf16 *o, const float *qkv, const float *v, size_t ldv, const float *g,
                           const float *beta, float *state, int32_t slot, int64_t t0, int64_t t1,
                           uint32_t h, uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv,
                           float *scratch) {
  size_t c = conv_width(nk, nv, dk, dv);
  uint32_t kh = h / (nv / nk); /* grouped: value head h reads key head h / r */
  size_t sz = (size_t)dk * dv;
  float *S;
  if (slot < 0) { /* padding: zero state, never stored */
    S = scratch;
    memset(S, 0, sz * sizeof *S);
  } else {
    S = state + ((size_t)slot * nv + h) * sz;
  }
  float *kd = scratch + sz;
  for (int64_t t = t0; t < t1; t++) {
    const float *row = qkv + (size_t)t * c;
    delta_step(S, o + ((size_t)t * nv + h) * dv, row + (size_t)kh * dk,
               row + (size_t)nk * dk + (size_t)kh * dk, v + (size_t)t * ldv + (size_t)h * dv,
               g[(size_t)t * nv + h], beta[(size_t)t * nv + h], dk, dv, kd);
  }
}

metrale_status cpu_delta_rule_decode(metrale_bf16 *o, const float *qkv, const float *g,
                                     const float *beta, float *state, const int32_t *slots,
                                     uint32_t bsz, uint32_t nk, uint32_t nv, uint32_t dk,
                                     uint32_t dv) {
  if (bsz == 0 || nv == 0) return METRALE_OK;
  float *scratch;
  int per;
  METRALE_RETURN_IF_ERROR(scratch_alloc(&scratch, &per, dk, dv));
  int64_t work = (int64_t)bsz * nv; /* (slot b, value head h) */
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < work; i++) {
    float *mine = scratch + (size_t)per * omp_get_thread_num();
    delta_sequence(o, qkv, qkv + 2 * (size_t)nk * dk, conv_width(nk, nv, dk, dv), g, beta, state,
                   slots[i / nv], i / nv, i / nv + 1, (uint32_t)(i % nv), nk, nv, dk, dv, mine);
  }
  free(scratch);
  return METRALE_OK;
}

/* The prefill with token t's v of head h at v + t*ldv + h*dv. */
static metrale_status prefill_v(metrale_bf16 *o, const float *qkv, const float *v, size_t ldv, const float *g,
                                const float *beta, float *state, const int32_t *cu_seqlens,
                                const int32_t *slots, uint32_t s, uint32_t nk, uint32_t nv, uint32_t dk,
                                uint32_t dv) {
  if (s == 0 || nv == 0) return METRALE_OK;
  float *scratch;
  int per;
  METRALE_RETURN_IF_ERROR(scratch_alloc(&scratch, &per, dk, dv));
  int64_t work = (int64_t)s * nv; /* (sequence, value head) */
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < work; i++) {
    float *mine = scratch + (size_t)per * omp_get_thread_num();
    int64_t seq = i / nv;
    delta_sequence(o, qkv, v, ldv, g, beta, state, slots[seq], cu_seqlens[seq], cu_seqlens[seq + 1],
                   (uint32_t)(i % nv), nk, nv, dk, dv, mine);
  }
  free(scratch);
  return METRALE_OK;
}

metrale_status cpu_delta_rule_prefill(metrale_bf16 *o, const float *qkv, const float *g,
                                      const float *beta, float *state, const int32_t *cu_seqlens,
                                      const int32_t *slots, uint32_t s, uint32_t nk, uint32_t nv,
                                      uint32_t dk, uint32_t dv) {
  return prefill_v(o, qkv, qkv + 2 * (size_t)nk * dk, conv_width(nk, nv, dk, dv), g, beta, state, cu_seqlens,
                   slots, s, nk, nv, dk, dv);
}

/* nv must be a multiple of nk: value head h reads key head h / (nv / nk). */
static metrale_status check_heads(const char *kernel, uint32_t nk, uint32_t nv) {
  if (nk == 0 || nv % nk != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: nv (%u) must be a non-zero multiple of nk (%u)",
                         kernel, nv, nk);
  return METRALE_OK;
}

metrale_status cpu_k_split_qkvzba35(const gpu_arg *args) {
  cpu_split_qkvzba35(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_p(args, 3),
                     cpu_arg_p(args, 4), cpu_arg_u(args, 5), cpu_arg_u(args, 6), cpu_arg_u(args, 7),
                     cpu_arg_u(args, 8), cpu_arg_u(args, 9));
  return METRALE_OK;
}

metrale_status cpu_k_l2norm_qk(const gpu_arg *args) {
  cpu_l2norm_qk(cpu_arg_p(args, 0), cpu_arg_u(args, 1), cpu_arg_u(args, 2), cpu_arg_u(args, 3),
                cpu_arg_u(args, 4));
  return METRALE_OK;
}

metrale_status cpu_k_gates(const gpu_arg *args) {
  cpu_gates(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2), cpu_arg_p(args, 3),
            cpu_arg_p(args, 4), cpu_arg_p(args, 5), cpu_arg_u(args, 6), cpu_arg_u(args, 7));
  return METRALE_OK;
}

/* gates_ba: gates with b and a side by side in each token's row [b | a] of ba [T, 2nv]. */
metrale_status cpu_k_gates_ba(const gpu_arg *args) {
  float *g = cpu_arg_p(args, 0), *beta = cpu_arg_p(args, 1);
  const float *ba = cpu_arg_p(args, 2), *a_log = cpu_arg_p(args, 3);
  const metrale_bf16 *dt_bias = cpu_arg_p(args, 4);
  const uint32_t n = cpu_arg_u(args, 5), nv = cpu_arg_u(args, 6);
  if (nv == 0) return METRALE_OK;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < (int64_t)n; i++) {
    const int64_t t = i / nv, h = i % nv;
    const float *row = ba + t * 2 * (int64_t)nv; /* [b | a] of token t */
    gate(&g[i], &beta[i], row[nv + h], row[h], a_log[h], dt_bias[h]);
  }
  return METRALE_OK;
}

metrale_status cpu_k_delta_rule_decode(const gpu_arg *args) {
  METRALE_RETURN_IF_ERROR(check_heads("delta_rule_decode", cpu_arg_u(args, 7), cpu_arg_u(args, 8)));
  return cpu_delta_rule_decode(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2),
                               cpu_arg_p(args, 3), cpu_arg_p(args, 4), cpu_arg_p(args, 5),
                               cpu_arg_u(args, 6), cpu_arg_u(args, 7), cpu_arg_u(args, 8),
                               cpu_arg_u(args, 9), cpu_arg_u(args, 10));
}

metrale_status cpu_k_delta_rule_prefill(const gpu_arg *args) {
  METRALE_RETURN_IF_ERROR(
      check_heads("delta_rule_prefill", cpu_arg_u(args, 8), cpu_arg_u(args, 9)));
  return cpu_delta_rule_prefill(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2),
                                cpu_arg_p(args, 3), cpu_arg_p(args, 4), cpu_arg_p(args, 5),
                                cpu_arg_p(args, 6), cpu_arg_u(args, 7), cpu_arg_u(args, 8),
                                cpu_arg_u(args, 9), cpu_arg_u(args, 10), cpu_arg_u(args, 11));
}

/* The chunked kernel's contract is the sequential op split over two launches; the cpu
 * does all of it in phase 1 and needs no workspace. */
metrale_status cpu_k_delta_rule_prefill_chunked(const gpu_arg *args) {
  uint32_t phase = cpu_arg_u(args, 13);
  if (phase > 1)
    return METRALE_ERROR(INVALID_ARGUMENT, "delta_rule_prefill_chunked: phase %u (0 or 1)", phase);
  METRALE_RETURN_IF_ERROR(
      check_heads("delta_rule_prefill_chunked", cpu_arg_u(args, 9), cpu_arg_u(args, 10)));
  if (phase == 0) return METRALE_OK;
  return cpu_delta_rule_prefill(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 2),
                                cpu_arg_p(args, 3), cpu_arg_p(args, 4), cpu_arg_p(args, 5),
                                cpu_arg_p(args, 6), cpu_arg_u(args, 8), cpu_arg_u(args, 9),
                                cpu_arg_u(args, 10), cpu_arg_u(args, 11), cpu_arg_u(args, 12));
}

/* delta_rule_prefill_chunked_f16 and its phase-0 entries.  The cpu runs the recurrence in f32
 * (the contract's accuracy bounds it) in phase 1; its records are the tokens' v, f32 [T, nv*dv]
 * from the start of ws (NC*nv*147584 bytes hold them: NC*64 >= T and dv <= 128), written by
 * phase 0 from qkv's value columns or, for _prep_vh, widened from vh. */
#define F16_DK_DV_MAX 128u
static metrale_status f16_checks(const char *kernel, const gpu_arg *args, int phase0_only) {
  const uint32_t phase = cpu_arg_u(args, 13), nk = cpu_arg_u(args, 9), nv = cpu_arg_u(args, 10),
                 dk = cpu_arg_u(args, 11), dv = cpu_arg_u(args, 12);
  if (phase > 1 || (phase0_only && phase != 0))
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: phase %u (%s)", kernel, phase, phase0_only ? "only 0" : "0 or 1");
  if (dk > F16_DK_DV_MAX || dv > F16_DK_DV_MAX || dk % 8 || dv % 8)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: dk = %u, dv = %u (multiples of 8 up to %u)", kernel, dk, dv,
                         F16_DK_DV_MAX);
  return check_heads(kernel, nk, nv);
}

/* The tokens of s sequences (cu_seqlens[s], 0 when negative). */
static size_t tokens_of(const gpu_arg *args) {
  const uint32_t s = cpu_arg_u(args, 8);
  const int32_t *cu = cpu_arg_p(args, 5);
  return s && cu[s] > 0 ? (size_t)cu[s] : 0u;
}

/* phase 0: the records from qkv's value columns */
static void f16_records(const gpu_arg *args) {
  const uint32_t nk = cpu_arg_u(args, 9), nv = cpu_arg_u(args, 10), dk = cpu_arg_u(args, 11), dv = cpu_arg_u(args, 12);
  const size_t t = tokens_of(args), c = conv_width(nk, nv, dk, dv), nvdv = (size_t)nv * dv;
  const float *qkv = cpu_arg_p(args, 1);
  float *rec = cpu_arg_p(args, 7);
  for (size_t tok = 0; tok < t; tok++) memcpy(rec + tok * nvdv, qkv + tok * c + 2 * (size_t)nk * dk, nvdv * sizeof *rec);
}

/* phase 1: the recurrence on the records' v */
static metrale_status f16_phase1(const gpu_arg *args) {
  const uint32_t nk = cpu_arg_u(args, 9), nv = cpu_arg_u(args, 10), dk = cpu_arg_u(args, 11), dv = cpu_arg_u(args, 12);
  return prefill_v(cpu_arg_p(args, 0), cpu_arg_p(args, 1), cpu_arg_p(args, 7), (size_t)nv * dv, cpu_arg_p(args, 2),
                   cpu_arg_p(args, 3), cpu_arg_p(args, 4), cpu_arg_p(args, 5), cpu_arg_p(args, 6),
                   cpu_arg_u(args, 8), nk, nv, dk, dv);
}

metrale_status cpu_k_delta_rule_prefill_chunked_f16(const gpu_arg *args) {
  METRALE_RETURN_IF_ERROR(f16_checks("delta_rule_prefill_chunked_f16", args, 0));
  if (cpu_arg_u(args, 13) == 0) {
    f16_records(args);
    return METRALE_OK;
  }
  return f16_phase1(args);
}

metrale_status cpu_k_delta_rule_prefill_chunked_f16_prep(const gpu_arg *args) {
  METRALE_RETURN_IF_ERROR(f16_checks("delta_rule_prefill_chunked_f16_prep", args, 1));
  f16_records(args);
  return METRALE_OK;
}

/* the records widened from vh [T, nv*dv] (argument 14), 16-byte aligned */
static metrale_status records_from_vh(const char *kernel, const gpu_arg *args) {
  if ((uintptr_t)cpu_arg_p(args, 14) % 16u != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs a 16-byte aligned vh", kernel);
  const size_t n = tokens_of(args) * cpu_arg_u(args, 10) * cpu_arg_u(args, 12);
  const uint16_t *vh = cpu_arg_p(args, 14);
  float *rec = cpu_arg_p(args, 7);
  for (size_t i = 0; i < n; i++) rec[i] = metrale_f16_to_f32(vh[i]);
  return METRALE_OK;
}

metrale_status cpu_k_delta_rule_prefill_chunked_f16_prep_vh(const gpu_arg *args) {
  METRALE_RETURN_IF_ERROR(f16_checks("delta_rule_prefill_chunked_f16_prep_vh", args, 1));
  return records_from_vh("delta_rule_prefill_chunked_f16_prep_vh", args);
}

/* delta_rule_prefill_chunked_wh and its phase 0: the f16 kernel's op on v = vh with one phase
 * each, for dk = dv = 128.  Their records on the cpu are the q/k planes the contract lays out
 * (kernel_bounds.h), then the tokens' v, f32 [T, nv*dv] widened from vh; phase 1 runs the
 * recurrence on the planes' q and k (IEEE half, as the GPU's scan reads them) and that v. */
static metrale_status wh_checks(const char *kernel, const gpu_arg *args, uint32_t phase) {
  const uint32_t dk = cpu_arg_u(args, 11), dv = cpu_arg_u(args, 12);
  if (cpu_arg_u(args, 13) != phase)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: phase %u (only %u)", kernel, cpu_arg_u(args, 13), phase);
  if (dk != 128 || dv != 128)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: dk = %u, dv = %u (only 128)", kernel, dk, dv);
  return check_heads(kernel, cpu_arg_u(args, 9), cpu_arg_u(args, 10));
}

/* The first chunk of sequence s among the NC a workspace holds (kernels.def
 * delta_rule_prefill_chunked_wh_prep), and the chunks of s sequences of t tokens. */
static size_t wh_first_chunk(const int32_t *cu, uint32_t s) {
  const size_t a = cu[s] > 0 ? (size_t)cu[s] : 0u, b = (a + 63u * (size_t)s) / 64u;
  return a < b ? a : b;
}
static size_t wh_planes_bytes(const int32_t *cu, uint32_t s, uint32_t nk) {
  return s ? wh_first_chunk(cu, s) * nk * METRALE_WH_QK_BYTES : 0u;
}

void cpu_wh_planes_put(unsigned char *ws, const float *qk, size_t ld, const int32_t *cu, uint32_t s, uint32_t nk) {
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t q = 0; q < (int64_t)s; q++) {
    const int64_t ts = cu[q], te = cu[q + 1];
    if (ts < 0 || te <= ts) continue;
    const size_t j0 = wh_first_chunk(cu, (uint32_t)q), n = (size_t)(te - ts + 63) / 64;
    for (size_t c = 0; c < n * 64; c++) { /* the chunks' tokens, zero past the sequence */
      const int in = ts + (int64_t)c < te;
      const float *row = qk + (size_t)(ts + (int64_t)c) * ld;
      for (uint32_t hh = 0; hh < 2 * nk; hh++) { /* q heads, then k heads */
        const uint32_t kh = hh % nk, isk = hh / nk;
        unsigned char *plane = ws + ((j0 + c / 64) * nk + kh) * METRALE_WH_QK_BYTES + isk * METRALE_WH_PLANE_BYTES;
        for (uint32_t d = 0; d < 128; d++) {
          const uint16_t v = in ? metrale_f32_to_f16(row[(size_t)hh * 128 + d]) : 0u;
          memcpy(plane + METRALE_WH_PLANE_AT(c % 64, d), &v, sizeof v);
        }
      }
    }
  }
}

void cpu_wh_planes_get(float *qk, size_t ld, const unsigned char *ws, const int32_t *cu, uint32_t s, uint32_t nk) {
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t q = 0; q < (int64_t)s; q++) {
    const int64_t ts = cu[q], te = cu[q + 1];
    if (ts < 0 || te <= ts) continue;
    const size_t j0 = wh_first_chunk(cu, (uint32_t)q);
    for (size_t c = 0; c < (size_t)(te - ts); c++) {
      float *row = qk + (size_t)(ts + (int64_t)c) * ld;
      for (uint32_t hh = 0; hh < 2 * nk; hh++) {
        const uint32_t kh = hh % nk, isk = hh / nk;
        const unsigned char *plane =
            ws + ((j0 + c / 64) * nk + kh) * METRALE_WH_QK_BYTES + isk * METRALE_WH_PLANE_BYTES;
        for (uint32_t d = 0; d < 128; d++) {
          uint16_t v;
          memcpy(&v, plane + METRALE_WH_PLANE_AT(c % 64, d), sizeof v);
          row[(size_t)hh * 128 + d] = metrale_f16_to_f32(v);
        }
      }
    }
  }
}

/* phase 0: v's records after the planes, widened from vh (argument 14, 16-byte aligned) */
static metrale_status wh_v_records(const char *kernel, const gpu_arg *args) {
  if ((uintptr_t)cpu_arg_p(args, 14) % 16u != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "%s: needs a 16-byte aligned vh", kernel);
  const size_t n = tokens_of(args) * cpu_arg_u(args, 10) * cpu_arg_u(args, 12);
  const uint16_t *vh = cpu_arg_p(args, 14);
  float *rec = (float *)((unsigned char *)cpu_arg_p(args, 7) +
                         wh_planes_bytes(cpu_arg_p(args, 5), cpu_arg_u(args, 8), cpu_arg_u(args, 9)));
  for (size_t i = 0; i < n; i++) rec[i] = metrale_f16_to_f32(vh[i]);
  return METRALE_OK;
}

metrale_status cpu_k_delta_rule_prefill_chunked_wh_prep(const gpu_arg *args) {
  METRALE_RETURN_IF_ERROR(wh_checks("delta_rule_prefill_chunked_wh_prep", args, 0));
  METRALE_RETURN_IF_ERROR(wh_v_records("delta_rule_prefill_chunked_wh_prep", args));
  const uint32_t nk = cpu_arg_u(args, 9), nv = cpu_arg_u(args, 10);
  cpu_wh_planes_put(cpu_arg_p(args, 7), cpu_arg_p(args, 1), conv_width(nk, nv, 128, 128), cpu_arg_p(args, 5),
                    cpu_arg_u(args, 8), nk);
  return METRALE_OK;
}

metrale_status cpu_k_delta_rule_prefill_chunked_wh_prep_qkh(const gpu_arg *args) {
  METRALE_RETURN_IF_ERROR(wh_checks("delta_rule_prefill_chunked_wh_prep_qkh", args, 0));
  return wh_v_records("delta_rule_prefill_chunked_wh_prep_qkh", args);
}

/* phase 1: the recurrence on the planes' q and k (into an f32 copy of qkv's rows, whose value
 * columns it leaves unread) and the records' v */
static metrale_status wh_phase1(const char *kernel, const gpu_arg *args) {
  const uint32_t s = cpu_arg_u(args, 8), nk = cpu_arg_u(args, 9), nv = cpu_arg_u(args, 10);
  const int32_t *cu = cpu_arg_p(args, 5);
  const unsigned char *ws = cpu_arg_p(args, 7);
  const size_t t = tokens_of(args), c = conv_width(nk, nv, 128, 128);
  float *qk = malloc((t * c + 1) * sizeof *qk);
  if (!qk) return METRALE_ERROR(OUT_OF_MEMORY, "%s: f32 copy of the q/k planes [%zu, %zu]", kernel, t, c);
  cpu_wh_planes_get(qk, c, ws, cu, s, nk);
  const metrale_status st =
      prefill_v(cpu_arg_p(args, 0), qk, (const float *)(ws + wh_planes_bytes(cu, s, nk)), (size_t)nv * 128,
                cpu_arg_p(args, 2), cpu_arg_p(args, 3), cpu_arg_p(args, 4), cu, cpu_arg_p(args, 6), s, nk, nv, 128, 128);
  free(qk);
  return st;
}

metrale_status cpu_k_delta_rule_prefill_chunked_wh(const gpu_arg *args) {
  METRALE_RETURN_IF_ERROR(wh_checks("delta_rule_prefill_chunked_wh", args, 1));
  if ((uintptr_t)cpu_arg_p(args, 0) % 16u != 0 || (uintptr_t)cpu_arg_p(args, 14) % 16u != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "delta_rule_prefill_chunked_wh: needs a 16-byte aligned o and vh");
  return wh_phase1("delta_rule_prefill_chunked_wh", args);
}

/* The same op in nseg segments: the cpu's recurrence runs whole in phase 3; phases 1 and 2, whose
 * workspace matrices are the backend's own, only check their arguments. */
metrale_status cpu_k_delta_rule_prefill_chunked_wh_seg(const gpu_arg *args) {
  const uint32_t phase = cpu_arg_u(args, 13), nseg = cpu_arg_u(args, 15), w0 = cpu_arg_u(args, 16);
  if (phase < 1 || phase > 3 || nseg < METRALE_WH_NSEG_MIN || nseg > METRALE_WH_NSEG_MAX || w0 < METRALE_WH_W0_MIN ||
      w0 > METRALE_WH_W0_MAX)
    return METRALE_ERROR(INVALID_ARGUMENT, "delta_rule_prefill_chunked_wh_seg: phase %u, nseg %u, w0 %u (phases 1 "
                         "to 3, %d to %d segments, w0 %d to %d)", phase, nseg, w0, METRALE_WH_NSEG_MIN,
                         METRALE_WH_NSEG_MAX, METRALE_WH_W0_MIN, METRALE_WH_W0_MAX);
  METRALE_RETURN_IF_ERROR(wh_checks("delta_rule_prefill_chunked_wh_seg", args, phase));
  if ((uintptr_t)cpu_arg_p(args, 0) % 16u != 0 || (uintptr_t)cpu_arg_p(args, 14) % 16u != 0)
    return METRALE_ERROR(INVALID_ARGUMENT, "delta_rule_prefill_chunked_wh_seg: needs a 16-byte aligned o and vh");
  return phase == 3 ? wh_phase1("delta_rule_prefill_chunked_wh_seg", args) : METRALE_OK;
}
