// y[M,N] = x[M,K] . w[N,K]^T, one 64x64 output tile per workgroup of 256 invocations,
// each owning a 4x4 grid of outputs (rows ty + 16i, columns tx + 16j); K is walked in
// slices of 16 staged (as fp32) in shared memory.  Sums run over k in order, in fp32.
// The includer defines GEMM_OUT_F32 (1: y is f32, 0: y is bf16) and may define
// GEMM_IN_F32 (1: x is f32, used unrounded; otherwise x is bf16).  w is always bf16.
#if LOCAL_SIZE != 256
#error "the gemm tile is laid out for 256 invocations"
#endif

#if defined(GEMM_IN_F32) && GEMM_IN_F32
#define GEMM_X(row, k) f32_at(args.x, uint64_t(row) * K).v[k]
#else
#define GEMM_X(row, k) bf16_to_f32(bf16_at(args.x, uint64_t(row) * K).v[k])
#endif

#define TILE 64
#define SLICE 16

shared float xs[SLICE][TILE];
shared float ws[SLICE][TILE];

void main() {
  uint M = args.m, N = args.n, K = args.k;
  uint m0 = gl_WorkGroupID.y * TILE, n0 = gl_WorkGroupID.x * TILE;
  if (m0 >= M || n0 >= N) return;  // uniform over the workgroup
  uint t = gl_LocalInvocationID.x;
  uint tx = t % 16u, ty = t / 16u;
  float acc[4][4];
  for (uint i = 0; i < 4; i++)
    for (uint j = 0; j < 4; j++) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < K; k0 += SLICE) {
    for (uint q = 0; q < 4; q++) {
      uint e = t + 256u * q;
      uint row = e / SLICE, kk = e % SLICE;
      uint k = k0 + kk;
      float xv = 0.0, wv = 0.0;
      if (k < K && m0 + row < M) xv = GEMM_X(m0 + row, k);
      if (k < K && n0 + row < N) wv = bf16_to_f32(bf16_at(args.w, uint64_t(n0 + row) * K).v[k]);
      xs[kk][row] = xv;
      ws[kk][row] = wv;
    }
    memoryBarrierShared();
    barrier();
    uint kn = min(uint(SLICE), K - k0);
    for (uint kk = 0; kk < kn; kk++) {
      float a[4], b[4];
      for (uint i = 0; i < 4; i++) a[i] = xs[kk][ty + 16u * i];
      for (uint j = 0; j < 4; j++) b[j] = ws[kk][tx + 16u * j];
      for (uint i = 0; i < 4; i++)
        for (uint j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
    }
    barrier();  // the slice is consumed before the next one overwrites it
  }

  for (uint i = 0; i < 4; i++) {
    uint m = m0 + ty + 16u * i;
    if (m >= M) continue;
    for (uint j = 0; j < 4; j++) {
      uint n = n0 + tx + 16u * j;
      if (n >= N) continue;
#if GEMM_OUT_F32
      f32_at(args.y, uint64_t(m) * N).v[n] = acc[i][j];
#else
      bf16_at(args.y, uint64_t(m) * N).v[n] = f32_to_bf16(acc[i][j]);
#endif
    }
  }
}
