/* bfloat16 storage type and exact conversions (round to nearest even, NaN kept NaN). */
#ifndef METRALE_BF16_H
#define METRALE_BF16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t metrale_bf16;

static inline float metrale_bf16_to_f32(metrale_bf16 h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline metrale_bf16 metrale_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (metrale_bf16)((u >> 16) | 0x0040u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (metrale_bf16)(u >> 16);
}

/* IEEE half -> float, exactly (F16 checkpoints, fp16 operands).  Branch-free so that loops
 * over many halves vectorise; subnormals go through an integer conversion, not through
 * float subnormals (which a flush-to-zero mode would lose). */
static inline float metrale_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h & 0x7c00u, m = h & 0x3ffu;
  uint32_t normal = (((uint32_t)h & 0x7fffu) << 13) + 0x38000000u; /* exponent bias 15 -> 127 */
  if (e == 0x7c00u) normal = 0x7f800000u | (m << 13);              /* infinity, NaN */
  const float small = (float)m * 0x1p-24f;                          /* zero, subnormals */
  uint32_t sub;
  memcpy(&sub, &small, sizeof sub);
  const uint32_t u = (e == 0 ? sub : normal) | sign;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* float -> IEEE half, rounded to nearest even: past 65504 to infinity, below 2^-14 to the
 * subnormals' 2^-24 steps, NaN kept NaN (quiet). */
static inline uint16_t metrale_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                    /* >= 65520: infinity */
  if (a >= 0x38800000u) {                                                     /* normal: >= 2^-14 */
    uint32_t r = a - 0x38000000u;                                             /* exponent bias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
  }
  if (a < 0x33000000u) return sign; /* below 2^-25 (2^-25 itself ties to even: zero) */
  const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e; /* 14..24 */
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

/* metrale_f32_to_f16 saturated at +-65504 (NaN kept NaN): as gemm_f16_ws_cols3q and
 * conv1d_prefill_l2norm_xhv store IEEE half. */
static inline uint16_t metrale_f32_to_f16_sat(float f) {
  return metrale_f32_to_f16(f > 65504.0f ? 65504.0f : f < -65504.0f ? -65504.0f : f);
}

#endif
