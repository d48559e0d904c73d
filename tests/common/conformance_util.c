#include "conformance_util.h"
#include "metrale/kernel_bounds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- random numbers ------------------------------------------------------------------ */

uint64_t mt_fresh_seed(void) {
  const char *env = getenv("METRALE_TEST_SEED");
  if (env && *env) return strtoull(env, NULL, 0);
  static uint64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)getpid() << 32) ^ (++counter * 0x9e3779b97f4a7c15ull);
  return s ? s : 1;
}

void mt_rng_init(mt_rng *rng, uint64_t seed) { rng->state = seed; }

uint64_t mt_next(mt_rng *rng) { /* splitmix64 */
  uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double mt_uniform(mt_rng *rng, double lo, double hi) {
  return lo + (hi - lo) * ((double)(mt_next(rng) >> 11) * 0x1.0p-53);
}

uint32_t mt_below(mt_rng *rng, uint32_t n) { return n ? (uint32_t)(mt_next(rng) % n) : 0; }

double mt_normal(mt_rng *rng) {
  double u1 = mt_uniform(rng, 0x1.0p-53, 1.0), u2 = mt_uniform(rng, 0.0, 1.0);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void mt_fill_bf16(mt_rng *rng, metrale_bf16 *x, size_t n, double lo, double hi) {
  for (size_t i = 0; i < n; i++) x[i] = metrale_f32_to_bf16((float)mt_uniform(rng, lo, hi));
}

void mt_fill_f32(mt_rng *rng, float *x, size_t n, double lo, double hi) {
  for (size_t i = 0; i < n; i++) x[i] = (float)mt_uniform(rng, lo, hi);
}

/* ---- numbers ------------------------------------------------------------------------- */

double mt_round_bf16(double x) {
  /* double -> float is exact enough here: a double that rounds differently through
   * float would have to lie within 2^-29 relative of a bf16 rounding boundary */
  return (double)metrale_bf16_to_f32(metrale_f32_to_bf16((float)x));
}

double mt_nmse(const double *a, const double *b, size_t n, size_t *out_nonfinite) {
  return mt_nmse_scaled(a, b, NULL, n, out_nonfinite);
}

double mt_nmse_scaled(const double *a, const double *b, const double *scale, size_t n, size_t *out_nonfinite) {
  if (!scale) scale = b;
  double num = 0.0, den = 0.0;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(a[i])) {
      bad++;
      continue;
    }
    double d = a[i] - b[i];
    num += d * d;
    den += scale[i] * scale[i];
  }
  if (out_nonfinite) *out_nonfinite = bad;
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return num / den;
}

void mt_bf16_to_double(double *out, const metrale_bf16 *x, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = mt_bf(x[i]);
}

void mt_f16_to_double(double *out, const uint16_t *x, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = (double)metrale_f16_to_f32(x[i]);
}

void mt_f32_to_double(double *out, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = (double)x[i];
}

double mt_nmse_bf16(const metrale_bf16 *a, const double *b, size_t n, size_t *out_nonfinite) {
  double *w = malloc((n ? n : 1) * sizeof *w);
  if (!w) return NAN;
  mt_bf16_to_double(w, a, n);
  double r = mt_nmse(w, b, n, out_nonfinite);
  free(w);
  return r;
}

double mt_nmse_f16(const uint16_t *a, const double *b, size_t n, size_t *out_nonfinite) {
  double *w = malloc((n ? n : 1) * sizeof *w);
  if (!w) return NAN;
  mt_f16_to_double(w, a, n);
  double r = mt_nmse(w, b, n, out_nonfinite);
  free(w);
  return r;
}

double mt_nmse_f32(const float *a, const double *b, size_t n, size_t *out_nonfinite) {
  return mt_nmse_f32_scaled(a, b, NULL, n, out_nonfinite);
}

double mt_nmse_f32_scaled(const float *a, const double *b, const double *scale, size_t n, size_t *out_nonfinite) {
  double *w = malloc((n ? n : 1) * sizeof *w);
  if (!w) return NAN;
  mt_f32_to_double(w, a, n);
  double r = mt_nmse_scaled(w, b, scale, n, out_nonfinite);
  free(w);
  return r;
}

/* ---- the gated delta rule ------------------------------------------------------------- */

void mt_delta_step(double *S, double *o, const float *q, const float *k, const float *v, double g,
                   double beta, uint32_t dk, uint32_t dv) {
  const double decay = exp(g);
  for (size_t i = 0; i < (size_t)dk * dv; i++) S[i] *= decay;
  for (uint32_t j = 0; j < dv; j++) {
    double kv = 0.0;
    for (uint32_t i = 0; i < dk; i++) kv += (double)k[i] * S[(size_t)i * dv + j];
    const double d = beta * ((double)v[j] - kv);
    for (uint32_t i = 0; i < dk; i++) S[(size_t)i * dv + j] += (double)k[i] * d;
  }
  for (uint32_t j = 0; j < dv; j++) {
    double acc = 0.0;
    for (uint32_t i = 0; i < dk; i++) acc += (double)q[i] * S[(size_t)i * dv + j];
    o[j] = acc;
  }
}

/* ---- guarded device buffers --------------------------------------------------------- */

static uint8_t guard_byte(uint64_t i) { return (uint8_t)(0xa5u ^ (i * 131u)); }

metrale_status mt_buffer_alloc(gpu_backend *be, uint64_t bytes, uint64_t guard, uint32_t misalign,
                               mt_buffer *out) {
  if (guard == 0) guard = MT_GUARD_BYTES;
  if (misalign >= 256u) return METRALE_ERROR(INVALID_ARGUMENT, "misalign %u (< 256)", misalign);
  guard = ((guard + 255u) & ~(uint64_t)255u) + misalign;
  gpu_ptr base = 0;
  METRALE_RETURN_IF_ERROR(be->vt->alloc(be, bytes + 2 * guard, &base));
  uint8_t *pattern = malloc(guard);
  if (!pattern) {
    be->vt->free(be, base);
    return METRALE_ERROR(OUT_OF_MEMORY, "guard pattern");
  }
  for (uint64_t i = 0; i < guard; i++) pattern[i] = guard_byte(i);
  metrale_status s = be->vt->copy_h2d(be, base, pattern, guard, NULL);
  if (!s) s = be->vt->copy_h2d(be, base + guard + bytes, pattern, guard, NULL);
  if (!s) s = be->vt->sync(be);
  free(pattern);
  if (s) {
    be->vt->free(be, base);
    return s;
  }
  out->base = base;
  out->ptr = base + guard;
  out->bytes = bytes;
  out->guard = guard;
  return METRALE_OK;
}

void mt_buffer_free(gpu_backend *be, mt_buffer *buf) {
  if (buf->base) be->vt->free(be, buf->base);
  memset(buf, 0, sizeof *buf);
}

int mt_guard_check(gpu_backend *be, const mt_buffer *buf, char *where, size_t where_cap) {
  uint8_t *g = malloc(2 * buf->guard);
  if (!g) return 0;
  metrale_status s = be->vt->copy_d2h(be, g, buf->base, buf->guard, NULL);
  if (!s) s = be->vt->copy_d2h(be, g + buf->guard, buf->ptr + buf->bytes, buf->guard, NULL);
  if (!s) s = be->vt->sync(be);
  int ok = s == METRALE_OK;
  if (s) {
    if (where) snprintf(where, where_cap, "download failed: %s", metrale_status_message(s));
    metrale_status_free(s);
  }
  for (uint64_t i = 0; ok && i < 2 * buf->guard; i++) {
    uint64_t off = i < buf->guard ? i : i - buf->guard;
    if (g[i] != guard_byte(off)) {
      ok = 0;
      if (where) {
        if (i < buf->guard)
          snprintf(where, where_cap, "%llu bytes before the buffer",
                   (unsigned long long)(buf->guard - i));
        else
          snprintf(where, where_cap, "%llu bytes after the buffer's end", (unsigned long long)off);
      }
    }
  }
  free(g);
  return ok;
}

metrale_status mt_upload(gpu_backend *be, const mt_buffer *buf, const void *src) {
  METRALE_RETURN_IF_ERROR(be->vt->copy_h2d(be, buf->ptr, src, buf->bytes, NULL));
  return be->vt->sync(be);
}

metrale_status mt_download(gpu_backend *be, void *dst, const mt_buffer *buf) {
  METRALE_RETURN_IF_ERROR(be->vt->copy_d2h(be, dst, buf->ptr, buf->bytes, NULL));
  return be->vt->sync(be);
}

size_t mt_wh_first_chunk(const int32_t *cu, uint32_t q) {
  const size_t a = cu[q] > 0 ? (size_t)cu[q] : 0u, b = (a + 63u * (size_t)q) / 64u;
  return a < b ? a : b;
}

size_t mt_wh_plane_at(size_t j, uint32_t nk, uint32_t kh, uint32_t isk, uint32_t tok, uint32_t d) {
  return ((j * nk + kh) * METRALE_WH_QK_BYTES + isk * METRALE_WH_PLANE_BYTES + METRALE_WH_PLANE_AT(tok, d)) / 2;
}
