// Dot products of weight rows with one input vector, for workgroups of 256 invocations
// split into 8 groups of 32: output o (< 64) is owned by group o / 8 and its 32 lanes
// take every 32nd element of the reduction; the 32 partial sums then meet in shared
// memory and are added in lane order by one invocation.  (No subgroup operations: the
// subgroup width differs between devices.)
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
