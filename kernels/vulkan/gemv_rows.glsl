// y[M,N] = x[M,K] . w[N,K]^T for small M (decode), shared by gemv_bf16, gemv_bf16_f32 and
// gemv_f32in.  Each workgroup owns 8 output features for all M rows (grid.x = ceil(N/8)):
// 32 invocations per feature walk K, 8 rows at a time, and rowdot_reduce adds their
// partial sums.  Where K % 8 == 0 and x and w start 16-byte aligned, a lane takes 8
// consecutive k of its row by one 16-byte load (a feature's 32 lanes read 512 contiguous
// bytes a step: a decode step is bound by these weight bytes); otherwise every 32nd k.
// The includer defines GEMV_OUT_F32 (1: y is f32, 0: y is bf16) and may define
// GEMV_IN_F32 (1: x is f32, used unrounded; otherwise x is bf16).  w is always bf16.
#include "rowdot.glsl"

#if defined(GEMV_IN_F32) && GEMV_IN_F32
#define GEMV_X(row, k) f32_at(args.x, uint64_t(row) * K).v[k]
#else
#define GEMV_X(row, k) bf16_to_f32(bf16_at(args.x, uint64_t(row) * K).v[k])
#endif

void main() {
  uint M = args.m, N = args.n, K = args.k;
  uint t = gl_LocalInvocationID.x;
  uint f = t / 32u, lane = t % 32u;
  uint n0 = gl_WorkGroupID.x * 8u;
  if (n0 >= N) return;  // uniform
  uint n = n0 + f;
  bool vec = K % 8u == 0u && args.x % 16ul == 0ul && args.w % 16ul == 0ul;
  for (uint m0 = 0; m0 < M; m0 += 8u) {
    float part[8];
    for (uint r = 0; r < 8; r++) part[r] = 0.0;
    if (n < N && vec) {
      for (uint k = lane * 8u; k < K; k += 256u) {
        float wv[8];  // unpacked once for the 8 rows
        bf16x8(U32x4(args.w + (uint64_t(n) * K + k) * 2ul).v, wv);
        for (uint r = 0; r < 8; r++) {
          if (m0 + r >= M) break;
          uint64_t xa = uint64_t(m0 + r) * K + k;
          float xv[8];
#if defined(GEMV_IN_F32) && GEMV_IN_F32
          vec4 x0 = F32x4(args.x + xa * 4ul).v, x1 = F32x4(args.x + xa * 4ul + 16ul).v;
          xv = float[8](x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w);
#else
          bf16x8(U32x4(args.x + xa * 2ul).v, xv);
#endif
          for (uint c = 0; c < 8u; c++) part[r] += wv[c] * xv[c];
        }
      }
    } else if (n < N) {
      BF16 w = bf16_at(args.w, uint64_t(n) * K);
      for (uint k = lane; k < K; k += 32u) {
        float wv = bf16_to_f32(w.v[k]);
        for (uint r = 0; r < 8; r++)
          if (m0 + r < M) part[r] += wv * GEMV_X(m0 + r, k);
      }
    }
    // rowdot_reduce's output o = group*8 + i holds part[i] of group `group`: here the
    // group is the feature and i the row.
    float total = rowdot_reduce(part);
    if (t < 64u) {
      uint feat = t / 8u, r = t % 8u;
      if (n0 + feat < N && m0 + r < M) {
#if GEMV_OUT_F32
        f32_at(args.y, uint64_t(m0 + r) * N).v[n0 + feat] = total;
#else
        bf16_at(args.y, uint64_t(m0 + r) * N).v[n0 + feat] = f32_to_bf16(total);
#endif
      }
    }
  }
}
