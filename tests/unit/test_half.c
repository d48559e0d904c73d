/* metrale/bf16.h's IEEE half conversions: float -> half rounds to nearest even (ties, the
 * subnormal steps, overflow to infinity, NaN kept), and half -> float inverts it exactly. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "metrale/bf16.h"

static float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

Test(half, known_values) {
  static const struct {
    float x;
    uint16_t h;
  } cases[] = {
      {0.0f, 0x0000},         {-0.0f, 0x8000},        {1.0f, 0x3c00},         {-2.0f, 0xc000},
      {65504.0f, 0x7bff},     {65519.99f, 0x7bff},    {65520.0f, 0x7c00},     {1e30f, 0x7c00},
      {-INFINITY, 0xfc00},    {6.103515625e-05f, 0x0400}, /* 2^-14, the smallest normal */
      {5.9604645e-08f, 0x0001},                            /* 2^-24, the smallest subnormal */
      {2.98023224e-08f, 0x0000},                           /* 2^-25: a tie, to even (zero) */
      {4.4703484e-08f, 0x0001},                            /* 1.5 * 2^-25 rounds up */
      {8.9406967e-08f, 0x0002},                            /* 1.5 * 2^-24: a tie, to even (2) */
      {1.00048828125f, 0x3c00},                            /* 1 + 2^-11: a tie, to even */
      {1.00146484375f, 0x3c02},                            /* 1 + 3 * 2^-11: a tie, to even (up) */
      {0.1f, 0x2e66},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const uint16_t h = metrale_f32_to_f16(cases[i].x);
    cr_expect_eq(h, cases[i].h, "f32_to_f16(%a) = %04x, want %04x", (double)cases[i].x, h, cases[i].h);
  }
  const uint16_t nan = metrale_f32_to_f16(bits_f(0x7fc00001u));
  cr_expect((nan & 0x7c00u) == 0x7c00u && (nan & 0x3ffu) != 0, "NaN stays NaN: %04x", nan);
  const uint16_t snan = metrale_f32_to_f16(bits_f(0xff800001u)); /* payload only in low bits */
  cr_expect((snan & 0xfc00u) == 0xfc00u && (snan & 0x3ffu) != 0, "signalling NaN stays NaN: %04x", snan);
}

/* Every half (but NaN) converts to a float and back to itself. */
Test(half, round_trip) {
  for (uint32_t h = 0; h < 0x10000u; h++) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue;
    const uint16_t back = metrale_f32_to_f16(metrale_f16_to_f32((uint16_t)h));
    cr_expect_eq(back, h, "%04x -> %a -> %04x", h, (double)metrale_f16_to_f32((uint16_t)h), back);
  }
}

/* Against the compiler's _Float16 conversion over a sweep of float bit patterns. */
#if defined(__FLT16_MAX__)
Test(half, matches_float16) {
  unsigned bad = 0;
  for (uint64_t i = 0; i < (1ull << 32); i += 4093) {
    const float x = bits_f((uint32_t)i);
    const _Float16 c = (_Float16)x;
    uint16_t want;
    memcpy(&want, &c, 2);
    if (isnan(x)) continue;
    if (metrale_f32_to_f16(x) != want && bad++ < 5)
      cr_expect_fail("%08x: %04x, _Float16 %04x", (unsigned)i, metrale_f32_to_f16(x), want);
  }
  cr_expect_eq(bad, 0u);
}
#endif
