// Staging a K slice of GEMM operands in shared memory as fp32, transposed: plane[k][row / 4]
// holds rows 4 at a time in a vec4, so that a step of k reads 4 rows by one 16-byte read
// (gemm_tile.glsl, moe_tile.glsl).  Macros, since a shared array passed to a function
// would be copied in and out.
#define put(plane, kk, row, v) plane[kk][(row) >> 2][(row) & 3u] = (v)
// the 8 bf16 of q (one 16-byte load: k = kk .. kk + 7 of `row`)
#define put8_bf16(plane, kk, row, q)                           \
  {                                                            \
    float f_[8];                                               \
    bf16x8(q, f_);                                             \
    for (uint c_ = 0u; c_ < 8u; c_++) put(plane, (kk) + c_, row, f_[c_]); \
  }
