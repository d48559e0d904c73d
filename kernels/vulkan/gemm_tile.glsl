// y[M,N] = x[M,K] . w[N,K]^T, one TILE x TILE output tile per workgroup of 256 invocations:
// TILE 64 for gemm_bf16, gemm_bf16_f32 and gemm_f32in (grid (ceil(N/64), ceil(M/64))), 128
// for the prefill's large GEMMs, gemm_bf16_t128 and gemm_f32in_t128 (grid (ceil(N/128),
// ceil(M/128))).
//
// Invocation t (tx = t % 16, ty = t / 16) owns G x G blocks of 4x4 outputs, G = TILE / 64:
// rows 64 g + ty*4 + i, columns 64 h + tx*4 + j (g, h < G; i, j < 4).  K is walked in slices
// of 16 staged in shared memory as fp32 and transposed (tile_stage.glsl), so that a step of
// k reads G vec4 of x and G of w for 16 G^2 FMAs (before, the 64x64 tile read 8 floats for
// 16).  Where K % 8 == 0 and x and w start 16-byte aligned, whole slices come by 16-byte
// loads into registers while the slice before is used; the last partial slice, and every
// slice otherwise, by elements.  Sums run over k in order, in fp32.  Shared memory:
// 2 x 16 x TILE floats (16 KiB at 128; lavapipe allows 32 KiB a workgroup).
//
// The includer defines TILE, GEMM_OUT_F32 (1: y is f32, 0: y is bf16) and may define
// GEMM_IN_F32 (1: x is f32, used unrounded; otherwise x is bf16).  w is always bf16.
#if LOCAL_SIZE != 256
#error "the gemm tile is laid out for 256 invocations"
#endif
#if TILE != 64 && TILE != 128
#error "TILE is 64 or 128"
#endif

#define G (TILE / 64)
#define SLICE 16

#include "tile_stage.glsl"

shared vec4 xs[SLICE][TILE / 4];
shared vec4 ws[SLICE][TILE / 4];

// 16-byte pieces of a slice: x's rows are 16 k of 4 (f32) or 2 (bf16) bytes, w's of 2; a
// piece is 4 f32 or 8 bf16.  Invocation t takes pieces t, t + 256, ... below the count.
#if defined(GEMM_IN_F32) && GEMM_IN_F32
#define X_PER_ROW 4u
#define XPiece vec4
float x_elem(uint64_t row, uint k) { return f32_at(args.x, row * args.k).v[k]; }
#else
#define X_PER_ROW 2u
#define XPiece uvec4
float x_elem(uint64_t row, uint k) { return bf16_to_f32(bf16_at(args.x, row * args.k).v[k]); }
#endif
#define X_PIECES (TILE * X_PER_ROW)
#define W_PIECES (TILE * 2u)
#define X_LOADS ((X_PIECES + 255u) / 256u)
#define W_LOADS ((W_PIECES + 255u) / 256u)

// the next slice, in registers between its loads and its stores (rows past M or N: zeros)
XPiece xr[X_LOADS];
uvec4 wr[W_LOADS];

void load_vec(uint m0, uint n0, uint k0) {
  uint t = gl_LocalInvocationID.x;
  [[unroll]] for (uint q = 0; q < X_LOADS; q++) {
    uint e = t + 256u * q, row = e / X_PER_ROW, m = m0 + row;
    uint64_t at = uint64_t(m) * args.k + k0 + (e % X_PER_ROW) * (16u / X_PER_ROW);
#if defined(GEMM_IN_F32) && GEMM_IN_F32
    xr[q] = e < X_PIECES && m < args.m ? F32x4(args.x + at * 4ul).v : vec4(0.0);
#else
    xr[q] = e < X_PIECES && m < args.m ? U32x4(args.x + at * 2ul).v : uvec4(0u);
#endif
  }
  [[unroll]] for (uint q = 0; q < W_LOADS; q++) {
    uint e = t + 256u * q, row = e >> 1, n = n0 + row;
    uint64_t at = uint64_t(n) * args.k + k0 + (e & 1u) * 8u;
    wr[q] = e < W_PIECES && n < args.n ? U32x4(args.w + at * 2ul).v : uvec4(0u);
  }
}

void store_vec() {
  uint t = gl_LocalInvocationID.x;
  [[unroll]] for (uint q = 0; q < X_LOADS; q++) {
    uint e = t + 256u * q, row = e / X_PER_ROW, kk = (e % X_PER_ROW) * (16u / X_PER_ROW);
    if (e >= X_PIECES) break;
#if defined(GEMM_IN_F32) && GEMM_IN_F32
    for (uint c = 0; c < 4u; c++) put(xs, kk + c, row, xr[q][c]);
#else
    put8_bf16(xs, kk, row, xr[q]);
#endif
  }
  [[unroll]] for (uint q = 0; q < W_LOADS; q++) {
    uint e = t + 256u * q;
    if (e >= W_PIECES) break;
    put8_bf16(ws, (e & 1u) * 8u, e >> 1, wr[q]);
  }
}

// One slice by elements: 16 consecutive invocations take one row's 16 k; k past K is 0.
void load_elems(uint m0, uint n0, uint k0) {
  uint t = gl_LocalInvocationID.x;
  for (uint q = 0; q < TILE * SLICE / 256u; q++) {
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

  bool aligned = K % 8u == 0u && args.x % 16ul == 0ul && args.w % 16ul == 0ul;
  uint nvec = aligned ? K / SLICE : 0u, nslices = (K + SLICE - 1u) / SLICE;

  vec4 acc[4 * G][G];  // acc[4 g + i][h]: row 64 g + ty*4 + i, columns 64 h + tx*4 .. +3
  [[unroll]] for (uint i = 0; i < 4u * G; i++)
    [[unroll]] for (uint h = 0; h < G; h++) acc[i][h] = vec4(0.0);

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
      // named operands: as arrays (vec4 a[G]) llvmpipe ran the 128x128 tile a third slower
      vec4 a0 = xs[kk][ty], b0 = ws[kk][tx];
#if G == 2
      vec4 a1 = xs[kk][16u + ty], b1 = ws[kk][16u + tx];
#endif
      [[unroll]] for (uint i = 0; i < 4u; i++) {
        acc[i][0] += a0[i] * b0;
#if G == 2
        acc[i][1] += a0[i] * b1;
        acc[4u + i][0] += a1[i] * b0;
        acc[4u + i][1] += a1[i] * b1;
#endif
      }
    }
    barrier();  // the slice is used before the next one overwrites it
  }

  [[unroll]] for (uint r = 0; r < 4u * G; r++) {
    uint m = m0 + 64u * (r / 4u) + ty * 4u + r % 4u;
    if (m >= M) continue;
    [[unroll]] for (uint h = 0; h < G; h++)
      [[unroll]] for (uint j = 0; j < 4u; j++) {
        uint n = n0 + 64u * h + tx * 4u + j;
        if (n >= N) continue;
#if GEMM_OUT_F32
        f32_at(args.y, uint64_t(m) * N).v[n] = acc[r][h][j];
#else
        bf16_at(args.y, uint64_t(m) * N).v[n] = f32_to_bf16(acc[r][h][j]);
#endif
      }
  }
}
