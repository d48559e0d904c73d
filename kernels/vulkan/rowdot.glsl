// Dot products of weight rows with one input vector, for workgroups of 256 invocations
// split into 8 groups of 32: output o (< 64) is owned by group o / 8 and its 32 lanes
// take every 32nd element of the reduction (or 8 consecutive ones in 256: rowdot_bf16); the
// 32 partial sums then meet in shared memory and are added in lane order by one invocation.
// (No subgroup operations: the subgroup width differs between devices.)
#if LOCAL_SIZE != 256
#error "rowdot is laid out for 256 invocations"
#endif

shared float rowdot_part[8 * 256];

// Writes the 8 partial sums of this invocation, then returns, for invocation t < 64,
// the total of output t (0.0 for the others).
float rowdot_reduce(float part[8]) {
  uint t = gl_LocalInvocationID.x;
  for (uint i = 0; i < 8; i++) rowdot_part[i * 256u + t] = part[i];
  memoryBarrierShared();
  barrier();
  float total = 0.0;
  if (t < 64u) {
    uint group = t / 8u, i = t % 8u;
    for (uint l = 0; l < 32u; l++) total += rowdot_part[i * 256u + group * 32u + l];
  }
  barrier();
  return total;
}

// Lane `lane` (< 32) of a dot product of two bf16 rows of K elements at byte addresses a and
// b: 8 consecutive elements by one 16-byte load each where vec (the caller has checked K % 8
// == 0 and both rows 16-byte aligned), so that 32 lanes read 512 contiguous bytes a step;
// otherwise every 32nd element.
float rowdot_bf16(uint64_t a, uint64_t b, uint K, uint lane, bool vec) {
  float part = 0.0;
  if (vec) {
    for (uint k = lane * 8u; k < K; k += 256u) {
      float pa[8], qa[8];
      bf16x8(U32x4(a + uint64_t(k) * 2ul).v, pa);
      bf16x8(U32x4(b + uint64_t(k) * 2ul).v, qa);
      for (uint c = 0; c < 8u; c++) part += pa[c] * qa[c];
    }
  } else {
    BF16 ra = BF16(a), rb = BF16(b);
    for (uint k = lane; k < K; k += 32u) part += bf16_to_f32(ra.v[k]) * bf16_to_f32(rb.v[k]);
  }
  return part;
}
