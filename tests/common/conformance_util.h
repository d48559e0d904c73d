/* Test helpers shared by the conformance suite and the layer tests: seeded random
 * inputs, the NMSE metric, bf16 rounding in double, and device buffers with guard
 * bands that must stay untouched by a kernel. */
#ifndef METRALE_TEST_CONFORMANCE_UTIL_H
#define METRALE_TEST_CONFORMANCE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "metrale/bf16.h"
#include "metrale/gpu_backend.h"

/* ---- random numbers ------------------------------------------------------------------ */

typedef struct mt_rng {
  uint64_t state;
} mt_rng;

/* A fresh seed per call (time, pid and a counter), or METRALE_TEST_SEED when set so a
 * failure can be replayed. */
uint64_t mt_fresh_seed(void);
void mt_rng_init(mt_rng *rng, uint64_t seed);
uint64_t mt_next(mt_rng *rng);
double mt_uniform(mt_rng *rng, double lo, double hi);
uint32_t mt_below(mt_rng *rng, uint32_t n); /* uniform in [0, n) */
double mt_normal(mt_rng *rng);              /* standard normal */

void mt_fill_bf16(mt_rng *rng, metrale_bf16 *x, size_t n, double lo, double hi);
void mt_fill_f32(mt_rng *rng, float *x, size_t n, double lo, double hi);

/* ---- numbers ------------------------------------------------------------------------- */

/* Rounds a double to the nearest bf16 value (ties to even) and back. */
double mt_round_bf16(double x);
static inline double mt_bf(metrale_bf16 h) { return (double)metrale_bf16_to_f32(h); }

/* Normalised mean squared error sum((a-b)^2) / sum(b^2) of a result a against the
 * reference b; 0 when both are all zero, +inf when only b is.  *out_nonfinite (may be
 * NULL) receives the number of NaN/inf entries of a, which the NMSE then ignores. */
double mt_nmse(const double *a, const double *b, size_t n, size_t *out_nonfinite);
/* Same with the denominator sum(scale^2) where scale is given (NULL: b), for values that are
 * sums whose terms can cancel (the scale being the terms' magnitudes). */
double mt_nmse_scaled(const double *a, const double *b, const double *scale, size_t n, size_t *out_nonfinite);
/* Same, with a in bf16, IEEE half or f32 storage. */
double mt_nmse_bf16(const metrale_bf16 *a, const double *b, size_t n, size_t *out_nonfinite);
double mt_nmse_f16(const uint16_t *a, const double *b, size_t n, size_t *out_nonfinite);
double mt_nmse_f32(const float *a, const double *b, size_t n, size_t *out_nonfinite);
double mt_nmse_f32_scaled(const float *a, const double *b, const double *scale, size_t n, size_t *out_nonfinite);

/* ---- the gated delta rule ------------------------------------------------------------- */

/* One token of one value head on S [dk, dv] in double, the recurrence every delta-rule kernel
 * computes: S *= e^g; d = beta (v - k^T S); S += k d^T; o = q^T S (o [dv]). */
void mt_delta_step(double *S, double *o, const float *q, const float *k, const float *v, double g,
                   double beta, uint32_t dk, uint32_t dv);

/* The whole-head kernels' q/k planes (kernels.def delta_rule_prefill_chunked_wh_prep, layout in
 * kernel_bounds.h): sequence q's first chunk among the NC = mt_wh_first_chunk(cu, nseq) a workspace
 * holds, and the index in halves of (chunk j, key head kh of nk, q's plane (isk 0) or k's, the chunk's
 * token tok, dimension d). */
size_t mt_wh_first_chunk(const int32_t *cu, uint32_t q);
size_t mt_wh_plane_at(size_t j, uint32_t nk, uint32_t kh, uint32_t isk, uint32_t tok, uint32_t d);

/* Widens storage to doubles (for comparing two backends' results). */
void mt_bf16_to_double(double *out, const metrale_bf16 *x, size_t n);
void mt_f16_to_double(double *out, const uint16_t *x, size_t n);
void mt_f32_to_double(double *out, const float *x, size_t n);

/* ---- guarded device buffers --------------------------------------------------------- */

#define MT_GUARD_BYTES 4096u

/* An allocation of guard + bytes + guard on a device; ptr is the usable start.  The
 * guards are filled with a pattern that mt_guard_check verifies. */
typedef struct mt_buffer {
  gpu_ptr base, ptr;
  uint64_t bytes, guard;
} mt_buffer;

/* guard 0 means MT_GUARD_BYTES; it is rounded up to a multiple of 256, and misalign (< 256)
 * added to it: ptr then lies misalign bytes past a 256-byte boundary (for kernels with a
 * path for aligned pointers and one for the rest). */
metrale_status mt_buffer_alloc(gpu_backend *be, uint64_t bytes, uint64_t guard, uint32_t misalign,
                               mt_buffer *out);
void mt_buffer_free(gpu_backend *be, mt_buffer *buf);
/* Returns 1 when both guards still hold the pattern; otherwise 0 and, in where (may be
 * NULL), "before +OFFSET" / "after +OFFSET" of the first changed byte. */
int mt_guard_check(gpu_backend *be, const mt_buffer *buf, char *where, size_t where_cap);
metrale_status mt_upload(gpu_backend *be, const mt_buffer *buf, const void *src);
metrale_status mt_download(gpu_backend *be, void *dst, const mt_buffer *buf);

#endif
