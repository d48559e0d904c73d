// A routed projection as grouped GEMMs (moe.moe_gate_up_sorted, moe.moe_down_sorted): the
// workgroup (slot, n block) of the grid (S, ceil(N/128)) reads slot (e, p, m) of tiles
// (moe_sort) and computes the 64 x 128 tile out[perm[p + r], n0 + c] = w[e, n0 + c, :] .
// a(perm[p + r]) for its m <= 64 rows r, so each weight element it stages serves up to 64
// routed rows instead of one.  Each of the 256 invocations owns 8 rows (ty*8 + i) and 4
// columns (tx*4 + j), tx = t % 32, ty = t / 32; K is walked in slices of 16 staged (as fp32,
// zero past K) in shared memory as tile_stage.glsl lays them out, so that a step of k reads
// two vec4 of rows and one of weights for 32 FMAs.  Where K % 8 == 0 and the operands start
// 16-byte aligned, a slice is loaded by 16-byte loads into registers while the slice before
// is used; otherwise by elements.  Sums run over k in order, in fp32.  Slots (-1, 0, 0) do
// nothing.
// The includer defines MOE_GATE_UP: 1 for gate_up (a(j) = x[j / k, :] of K = h, out gu
// bf16 [R, N = n]), 0 for down (a(j) = act[j, :] of K = n, out y f32 [R, N = h]).
#if LOCAL_SIZE != 256
#error "the grouped tile is laid out for 256 invocations"
#endif

#define TM 64u
#define TN 128u
#define SLICE 16u

#if MOE_GATE_UP
#define MOE_K args.h
#define MOE_N args.n
#define MOE_A_ROW(j) (uint64_t((j) / args.k) * MOE_K)
#define MOE_A args.x
#else
#define MOE_K args.n
#define MOE_N args.h
#define MOE_A_ROW(j) (uint64_t(j) * MOE_K)
#define MOE_A args.act
#endif

#include "tile_stage.glsl"

shared vec4 as_[SLICE][TM / 4u];
shared vec4 ws_[SLICE][TN / 4u];
shared int rows_[TM];

// The next slice in registers: invocation t < 128 holds 8 k of routed row t / 2, every
// invocation 8 k of weight row t / 2 (rows past m or N: zeros).
uvec4 ar, wr;

void load_vec(uint64_t w0, uint n0, uint k0) {
  uint t = gl_LocalInvocationID.x, row = t >> 1, kk = k0 + (t & 1u) * 8u;
  ar = uvec4(0u);
  if (t < 2u * TM) {
    int j = rows_[row];
    if (j >= 0) ar = U32x4(MOE_A + (MOE_A_ROW(uint(j)) + kk) * 2ul).v;
  }
  uint n = n0 + row;
  wr = n < MOE_N ? U32x4(args.w + (w0 + uint64_t(n) * MOE_K + kk) * 2ul).v : uvec4(0u);
}

void store_vec() {
  uint t = gl_LocalInvocationID.x, row = t >> 1, kk = (t & 1u) * 8u;
  if (t < 2u * TM) put8_bf16(as_, kk, row, ar);
  put8_bf16(ws_, kk, row, wr);
}

void load_elems(uint64_t w0, uint n0, uint k0) {
  uint t = gl_LocalInvocationID.x, K = MOE_K;
  // 64 x 16 routed-row values (4 an invocation), 128 x 16 weights (8 an invocation)
  for (uint q = 0; q < 4u; q++) {
    uint el = t + 256u * q, r = el / SLICE, kk = el % SLICE, k = k0 + kk;
    int j = rows_[r];
    put(as_, kk, r, j >= 0 && k < K ? bf16_to_f32(bf16_at(MOE_A, MOE_A_ROW(uint(j))).v[k]) : 0.0);
  }
  for (uint q = 0; q < 8u; q++) {
    uint el = t + 256u * q, c = el / SLICE, kk = el % SLICE, k = k0 + kk, n = n0 + c;
    put(ws_, kk, c, n < MOE_N && k < K ? bf16_to_f32(bf16_at(args.w, w0 + uint64_t(n) * K).v[k]) : 0.0);
  }
}

void main() {
  uint slot = gl_WorkGroupID.x, n0 = gl_WorkGroupID.y * TN;
  uint K = MOE_K, N = MOE_N;
  I32 tile = i32_at(args.tiles, uint64_t(slot) * 3ul);
  int e = tile.v[0];
  if (e < 0 || uint(e) >= args.e || n0 >= N) return;  // uniform over the workgroup
#if MOE_GATE_UP
  if (args.k == 0u) return;
#endif
  uint p = uint(tile.v[1]), m = min(uint(tile.v[2]), TM);
  uint t = gl_LocalInvocationID.x, tx = t % 32u, ty = t / 32u;
  if (t < TM) {
    int j = t < m && p + t < args.r ? I32(args.perm).v[p + t] : -1;
    rows_[t] = j >= 0 && uint(j) < args.r ? j : -1; /* a row outside [0, R) is not touched */
  }
  memoryBarrierShared();
  barrier();

  uint64_t w0 = uint64_t(e) * N * K;
  bool aligned = K % 8u == 0u && MOE_A % 16ul == 0ul && args.w % 16ul == 0ul;
  uint nvec = aligned ? K / SLICE : 0u, nslices = (K + SLICE - 1u) / SLICE;
  vec4 acc[8];  // acc[i]: row ty*8 + i, columns tx*4 .. +3
  for (uint i = 0; i < 8u; i++) acc[i] = vec4(0.0);

  if (nvec > 0u) load_vec(w0, n0, 0u);
  for (uint s = 0; s < nslices; s++) {
    uint k0 = s * SLICE;
    if (s < nvec)
      store_vec();
    else
      load_elems(w0, n0, k0);
    memoryBarrierShared();
    barrier();
    if (s + 1u < nvec) load_vec(w0, n0, k0 + SLICE);  // in flight while this slice is used
    uint kn = min(SLICE, K - k0);
    for (uint kk = 0; kk < kn; kk++) {
      vec4 a0 = as_[kk][2u * ty], a1 = as_[kk][2u * ty + 1u], b = ws_[kk][tx];
      for (uint i = 0; i < 4u; i++) {
        acc[i] += a0[i] * b;
        acc[4u + i] += a1[i] * b;
      }
    }
    barrier();  // the slice is consumed before the next one overwrites it
  }

  for (uint i = 0; i < 8u; i++) {
    int j = rows_[ty * 8u + i];
    if (j < 0) continue;
    for (uint c = 0; c < 4u; c++) {
      uint n = n0 + tx * 4u + c;
      if (n >= N) continue;
#if MOE_GATE_UP
      bf16_at(args.gu, uint64_t(j) * N).v[n] = f32_to_bf16(acc[i][c]);
#else
      f32_at(args.y, uint64_t(j) * N).v[n] = acc[i][c];
#endif
    }
  }
}
