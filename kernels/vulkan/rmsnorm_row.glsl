// y[r,:] = x[r,:] * rsqrt(mean(x[r,:]^2) + eps) * (1 + w), one row per workgroup, shared by
// norm.rmsnorm and norm.rmsnorm_f32.  x and w are bf16; the includer defines
// RMSNORM_OUT_F32 (1: y f32, not rounded; 0: y bf16).  With a bf16 y, x and y may be the
// same buffer: each element is read and written by one invocation, and all reads of the
// sum happen before the reduction's barrier.

void main() {
  uint r = gl_WorkGroupID.x;
  if (r >= args.rows) return;  // uniform over the workgroup
  uint n = args.n, t = gl_LocalInvocationID.x;
  BF16 x = bf16_at(args.x, uint64_t(r) * n);
  BF16 w = BF16(args.w);
  float ss = 0.0;
  for (uint i = t; i < n; i += LOCAL_SIZE) {
    float v = bf16_to_f32(x.v[i]);
    ss += v * v;
  }
  float inv = inversesqrt(block_sum(ss) / float(n) + args.eps);
  for (uint i = t; i < n; i += LOCAL_SIZE) {
    float v = bf16_to_f32(x.v[i]) * inv * (1.0 + bf16_to_f32(w.v[i]));
#if RMSNORM_OUT_F32
    f32_at(args.y, uint64_t(r) * n).v[i] = v;
#else
    bf16_at(args.y, uint64_t(r) * n).v[i] = f32_to_bf16(v);
#endif
  }
}
