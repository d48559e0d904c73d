// y[M,N] = x[M,K] . w[N,K]^T on 128x128 output tiles, for the prefill's large GEMMs
// (gemm_bf16_t128, gemm_f32in_t128; grid (ceil(N/128), ceil(M/128))).
//
// A workgroup of 256 invocations (tx = t % 16, ty = t / 16) owns one tile; each invocation
// an 8x8 grid of outputs: rows ty*4 + i and 64 + ty*4 + i, columns tx*4 + j and
// 64 + tx*4 + j (i, j < 4).  K is walked in slices of 16 staged in shared memory as fp32,
// transposed ([k][row], four rows a vec4), so that a step of k reads two vec4 of x and two
// of w for 64 FMAs.  While a slice is used, the next one is already being loaded into
// registers (16 bytes an invocation and operand).  Sums run over k in order, in fp32.
//
// Memory (against gemm_tile.glsl's 64x64 tiles, which load one element a load): 16-byte
// loads where K % 8 == 0 and x and w start 16-byte aligned, the last partial slice and any
// other case by elements; 16 KiB of shared memory (lavapipe allows 32 KiB a workgroup).
//
// The includer defines GEMM_OUT_F32 (1: y is f32, 0: y is bf16) and may define
// GEMM_IN_F32 (1: x is f32, used unrounded; otherwise x is bf16).  w is always bf16.
#if LOCAL_SIZE != 256
#error "the 128x128 gemm tile is laid out for 256 invocations"
#endif

#define TILE 128
#define SLICE 16

// [k of the slice][row / 4], row % 4 the component
shared vec4 xs[SLICE][TILE / 4];
shared vec4 ws[SLICE][TILE / 4];

#if defined(GEMM_IN_F32) && GEMM_IN_F32
#define X_BYTES 4u
#define X_VEC4 2u  // vec4 loads of x an invocation and slice (128 rows x 16 k / 4 / 256)
float x_elem(uint64_t row, uint k) { return f32_at(args.x, row * args.k).v[k]; }
#else
#define X_BYTES 2u
#define X_VEC4 1u  // uvec4 (8 bf16) loads of x an invocation and slice
float x_elem(uint64_t row, uint k) { return bf16_to_f32(bf16_at(args.x, row * args.k).v[k]); }
#endif

// (a macro: a shared array passed to a function would be copied in and out)
#define put(plane, kk, row, v) plane[kk][(row) >> 2][(row) & 3u] = (v)

// The next slice's 16-byte pieces, held in registers between the loads and the stores.
// Rows past M or N load zeros.
#if defined(GEMM_IN_F32) && GEMM_IN_F32
vec4 xr[X_VEC4];
#else
uvec4 xr[X_VEC4];
#endif
uvec4 wr;

void load_vec(uint m0, uint n0, uint k0) {
  uint t = gl_LocalInvocationID.x;
  for (uint q = 0; q < X_VEC4; q++) {
    // x: rows of 16 k = 64 (f32) or 32 (bf16) bytes, 16 bytes a piece
    uint e = t + 256u * q, per_row = 16u * X_BYTES / 16u;
    uint row = e / per_row, kk = (e % per_row) * (16u / X_BYTES);
    uint m = m0 + row;
#if defined(GEMM_IN_F32) && GEMM_IN_F32
    xr[q] = m < args.m ? F32x4(args.x + (uint64_t(m) * args.k + k0 + kk) * 4ul).v : vec4(0.0);
#else
    xr[q] = m < args.m ? U32x4(args.x + (uint64_t(m) * args.k + k0 + kk) * 2ul).v : uvec4(0u);
#endif
  }
  uint row = t >> 1, kk = (t & 1u) * 8u, n = n0 + row;  // w: 32 bytes a row, 2 pieces
  wr = n < args.n ? U32x4(args.w + (uint64_t(n) * args.k + k0 + kk) * 2ul).v : uvec4(0u);
}

void store_vec() {
  uint t = gl_LocalInvocationID.x;
  for (uint q = 0; q < X_VEC4; q++) {
    uint e = t + 256u * q, per_row = 16u * X_BYTES / 16u;
    uint row = e / per_row, kk = (e % per_row) * (16u / X_BYTES);
#if defined(GEMM_IN_F32) && GEMM_IN_F32
    for (uint c = 0; c < 4u; c++) put(xs, kk + c, row, xr[q][c]);
#else
    for (uint c = 0; c < 4u; c++) {
      put(xs, kk + 2u * c, row, bf16_lo(xr[q][c]));
      put(xs, kk + 2u * c + 1u, row, bf16_hi(xr[q][c]));
    }
#endif
  }
  uint row = t >> 1, kk = (t & 1u) * 8u;
  for (uint c = 0; c < 4u; c++) {
    put(ws, kk + 2u * c, row, bf16_lo(wr[c]));
    put(ws, kk + 2u * c + 1u, row, bf16_hi(wr[c]));
  }
}

// One slice by elements: 16 consecutive invocations take one row's 16 k; k past K is 0.
void load_elems(uint m0, uint n0, uint k0) {
  uint t = gl_LocalInvocationID.x;
  for (uint q = 0; q < 8u; q++) {
    uint e = t + 256u * q, row = e / SLICE, kk = e % SLICE, k = k0 + kk;
    uint m = m0 + row, n = n0 + row;
    put(xs, kk, row, k < args.k && m < args.m ? x_elem(m, k) : 0.0);
    put(ws, kk, row, k < args.k && n < args.n ? bf16_to_f32(bf16_at(args.w, uint64_t(n) * args.k).v[k]) : 0.0);
  }
}

void main() {
  uint M = args.m, N = args.n, K = args.k;
  uint m0 = gl_WorkGroupID.y * TILE, n0 = gl_WorkGroupID.x * TILE;
  if (m0 >= M || n0 >= N) return;  // uniform over the workgroup
  uint t = gl_LocalInvocationID.x;
  uint tx = t % 16u, ty = t / 16u;

  // whole slices by 16-byte loads when every piece is aligned; the rest by elements
  bool aligned = K % 8u == 0u && args.x % 16ul == 0ul && args.w % 16ul == 0ul;
  uint nvec = aligned ? K / SLICE : 0u, nslices = (K + SLICE - 1u) / SLICE;

  vec4 acc[8][2];  // acc[i][h]: row (i < 4 ? ty*4 + i : 64 + ty*4 + i - 4), columns h*64 + tx*4 + 0..3
  for (uint i = 0; i < 8u; i++) acc[i][0] = acc[i][1] = vec4(0.0);

  if (nvec > 0u) load_vec(m0, n0, 0u);
  for (uint s = 0; s < nslices; s++) {
    uint k0 = s * SLICE;
    if (s < nvec)
      store_vec();
    else
      load_elems(m0, n0, k0);
    memoryBarrierShared();
    barrier();
    if (s + 1u < nvec) load_vec(m0, n0, k0 + SLICE);  // in flight while this slice is used
    uint kn = min(uint(SLICE), K - k0);
    for (uint kk = 0; kk < kn; kk++) {
      vec4 a0 = xs[kk][ty], a1 = xs[kk][16u + ty];
      vec4 b0 = ws[kk][tx], b1 = ws[kk][16u + tx];
      for (uint i = 0; i < 4u; i++) {
        acc[i][0] += a0[i] * b0;
        acc[i][1] += a0[i] * b1;
        acc[4u + i][0] += a1[i] * b0;
        acc[4u + i][1] += a1[i] * b1;
      }
    }
    barrier();  // the slice is used before the next one overwrites it
  }

  for (uint i = 0; i < 8u; i++) {
    uint m = m0 + (i < 4u ? 0u : 64u) + ty * 4u + (i & 3u);
    if (m >= M) continue;
    for (uint h = 0; h < 2u; h++)
      for (uint j = 0; j < 4u; j++) {
        uint n = n0 + h * 64u + tx * 4u + j;
        if (n >= N) continue;
#if GEMM_OUT_F32
        f32_at(args.y, uint64_t(m) * N).v[n] = acc[i][h][j];
#else
        bf16_at(args.y, uint64_t(m) * N).v[n] = f32_to_bf16(acc[i][h][j]);
#endif
      }
  }
}
