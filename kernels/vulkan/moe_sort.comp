#version 460
#extension GL_GOOGLE_include_directive : require
// moe.moe_sort, one workgroup per expert e (grid E): lists expert e's routed rows, in
// increasing order, at perm[o_e ..), o_e = the rows of experts below e, and writes e's
// stretch of the slots: [floor(o_e/64) + e, floor(o_{e+1}/64) + e + 1), its first
// ceil(c_e/64) slots its 64-row tiles, the rest (-1, 0, 0).  These stretches tile the
// slots up to floor(V/64) + E (V the valid rows); the last expert also empties the slots
// after that and writes -1 over perm[V .. R).  Stable and free of atomics: each workgroup
// counts for itself, then ranks its rows 256 at a time by a workgroup prefix sum.
#include "common.glsl"

#define TILE_ROWS 64u

shared uint sort_sum[LOCAL_SIZE];

// Workgroup sum of a count (uniform control flow).
uint block_sum_u(uint v) {
  uint t = gl_LocalInvocationID.x;
  sort_sum[t] = v;
  memoryBarrierShared();
  barrier();
  for (uint s = LOCAL_SIZE / 2; s > 0; s >>= 1) {
    if (t < s) sort_sum[t] += sort_sum[t + s];
    memoryBarrierShared();
    barrier();
  }
  uint r = sort_sum[0];
  barrier();
  return r;
}

// Inclusive prefix sum over the workgroup's invocations, and in `total` the sum of all
// (Hillis-Steele, uniform control flow).
uint block_scan_u(uint v, out uint total) {
  uint t = gl_LocalInvocationID.x;
  sort_sum[t] = v;
  memoryBarrierShared();
  barrier();
  for (uint d = 1; d < LOCAL_SIZE; d <<= 1) {
    uint add = t >= d ? sort_sum[t - d] : 0u;
    barrier();
    sort_sum[t] += add;
    memoryBarrierShared();
    barrier();
  }
  uint r = sort_sum[t];
  total = sort_sum[LOCAL_SIZE - 1u];
  barrier();
  return r;
}

void main() {
  uint e = gl_WorkGroupID.x, E = args.e, R = args.r, t = gl_LocalInvocationID.x;
  if (e >= E) return;  // uniform over the workgroup
  I32 idx = I32(args.idx), perm = I32(args.perm), tiles = I32(args.tiles);

  uint below = 0u, mine = 0u, valid = 0u;
  for (uint j = t; j < R; j += LOCAL_SIZE) {
    int x = idx.v[j];
    if (x >= 0 && uint(x) < e) below++;
    if (x >= 0 && uint(x) == e) mine++;
    if (x >= 0 && uint(x) < E) valid++;
  }
  uint o = block_sum_u(below), c = block_sum_u(mine), v = block_sum_u(valid);

  // expert e's rows, in order: each group of LOCAL_SIZE rows ranked by a prefix sum
  uint placed = 0u;
  for (uint base = 0u; base < R && placed < c; base += LOCAL_SIZE) {
    uint j = base + t;
    uint here = j < R && idx.v[j] >= 0 && uint(idx.v[j]) == e ? 1u : 0u;
    uint group;
    uint incl = block_scan_u(here, group);
    if (here != 0u) perm.v[o + placed + incl - 1u] = int(j);
    placed += group;
  }

  uint first = o / TILE_ROWS + e, end = (o + c) / TILE_ROWS + e + 1u;
  if (e == E - 1u) end = (R + TILE_ROWS - 1u) / TILE_ROWS + E + 1u;  // the slots after V too
  for (uint s = first + t; s < end; s += LOCAL_SIZE) {
    uint i = s - first;
    bool tile = i * TILE_ROWS < c;
    tiles.v[3u * s] = tile ? int(e) : -1;
    tiles.v[3u * s + 1u] = tile ? int(o + i * TILE_ROWS) : 0;
    tiles.v[3u * s + 2u] = tile ? int(min(TILE_ROWS, c - i * TILE_ROWS)) : 0;
  }
  if (e == E - 1u)
    for (uint j = v + t; j < R; j += LOCAL_SIZE) perm.v[j] = -1;
}
