// y[M,N] = x[M,K] . w[N,K]^T for small M (decode), shared by gemv_bf16 and gemv_bf16_f32.
// Each workgroup owns 8 output features for all M rows (grid.x = ceil(N/8)): 32
// invocations per feature walk K, 8 rows at a time, and rowdot_reduce adds their
// partial sums.  The includer defines GEMV_OUT_F32 (1: y is f32, 0: y is bf16) and may
// define GEMV_IN_F32 (1: x is f32, used unrounded; otherwise x is bf16).  w is always bf16.
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
  for (uint m0 = 0; m0 < M; m0 += 8u) {
    float part[8];
    for (uint r = 0; r < 8; r++) part[r] = 0.0;
    if (n < N) {
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
