#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// gdn_chunked.delta_rule_prefill_chunked (kernels.def): the op of delta_rule_prefill in chunks
// of CH = 64 tokens, in the WY form, on plain f32 FMAs (no cooperative matrices; every sum in
// f32, so better than the contract's split products).  For a chunk of L tokens of value head h
// (key head hk) starting from state S [dk, dv], with G_r = g_0 + ... + g_r (r < L):
//   A[r][j] = beta_r (k_r . k_j) e^(G_r - G_j)   (j < r),   T = (I + A)^-1
//   W = T diag(beta) (k_j e^(G_j))_j   [L, dk]        U = T diag(beta) V   [L, dv]
//   M[r][j] = (q_r . k_j) e^(G_r - G_j)  (j <= r)
//   D = U - W S,   O = diag(e^(G_r)) Q S + M D,   S' = e^(G_(L-1)) S + sum_j k_j e^(G_(L-1) - G_j) D_j
// (D's rows are the tokens' d = beta (v - k^T S): the token recurrence of delta_seq.glsl).
//
// phase 0, grid.x = NC*nv: block (chunk c, value head h) writes record c*nv + h of ws (chunks
// numbered sequence after sequence; blocks past the last chunk return): W, U, M and G, rows
// r >= L zero (G's repeat G_(L-1)).
// phase 1, grid.x = S*nv*ceil(dv/V): block (sequence s, value head h, V columns) runs the
// chunks of s in order with its [dk, V] columns of S in shared memory.  V is 16 or 32; as a
// dispatch split by vkCmdDispatchBase has no whole grid to read, the backend passes phase 2
// for V = 32 (vk_pipeline.c tells the two grids apart, as the contract says).
//
// Where the driver caps a shader invocation's loop iterations (llvmpipe), the backend sets
// LOOP_CAP and dispatches phase 1 once for each window of chunks (workgroup row y).  A window
// that does not end its sequence leaves its state columns in the U columns of its last two
// records, which only this block reads; the next window starts from there.  So padding
// sequences (slot -1) are exact here too.
#include "common.glsl"

layout(constant_id = 0) const uint LOOP_CAP = 0u;

#define CH 64u
#define REC_FLOATS 36896u  // kernels.def: 147584 bytes a (chunk, value head) record
#define REC_W 0u           // W [CH][dk]
#define REC_U 8192u        // U [CH][dv]
#define REC_M 16384u       // M [CH][CH]
#define REC_G 20480u       // G [CH]

// One pool for both phases (their arrays never live at once).
shared float sh[6336];
#define SH_A 0u     // phase 0: A, then T below its unit diagonal, [CH][CH + 1]
#define SH_X 4160u  // phase 0: k and q slices [16][CH] each, then X [CH][16]
#define SH_S 0u     // phase 1: the block's state columns [dk][V]
#define SH_D 4096u  // phase 1: D [CH][V]
#define SH_G 6208u  // G [CH]
#define SH_B 6272u  // phase 0: beta [CH]; phase 1: e^(G_(L-1) - G_j) [CH]
#define TROW (CH + 1u)

#define sync() \
  memoryBarrierShared(); \
  barrier()

uint chunks_of(int len) { return len > 0 ? (uint(len) + CH - 1u) / CH : 0u; }
F32 rec_at(uint rec, uint off) { return f32_at(args.ws, uint64_t(rec) * REC_FLOATS + off); }
// row `tok` of qkv f32 [T, C], from column `col` on
F32 qkv_row(uint tok, uint C, uint col) { return f32_at(args.qkv, uint64_t(tok) * C + col); }

// Chunks one phase-1 dispatch runs under LOOP_CAP: backends/vulkan/vk_internal.h
// vk_chunk_window(), the same formula (at least 2, so that a window can hand its state on).
uint window_chunks(uint dk, uint v) {
  uint around = args.s + 2u * ((dk * v + LOCAL_SIZE - 1u) / LOCAL_SIZE) + 8u;
  uint per_chunk = (v / 16u) * (dk + CH) + ((dk + 8u * (LOCAL_SIZE / v) - 1u) / (8u * (LOCAL_SIZE / v))) * CH + 8u;
  uint w = LOOP_CAP > around ? (LOOP_CAP - around) / per_chunk : 0u;
  return max(w, 2u);
}

void phase0() {
  uint nk = args.nk, nv = args.nv, dk = args.dk, dv = args.dv, t = gl_LocalInvocationID.x;
  uint ci = gl_WorkGroupID.x / nv, h = gl_WorkGroupID.x % nv;
  I32 cu = I32(args.cu_seqlens);
  uint left = ci, tc = 0u;
  int L = 0;
  for (uint s = 0u; s < args.s; s++) {  // the chunk's sequence (uniform: the block returns as one)
    int len = cu.v[s + 1u] - cu.v[s];
    uint n = chunks_of(len);
    if (left < n) {
      tc = uint(cu.v[s]) + left * CH;
      L = min(int(CH), len - int(left * CH));
      break;
    }
    left -= n;
  }
  if (L <= 0) return;
  uint hk = h / (nv / nk), C = 2u * nk * dk + nv * dv, rec = ci * nv + h;
  uint kcol = nk * dk + hk * dk, qcol = hk * dk, vcol = 2u * nk * dk + h * dv;

  F32 g = F32(args.g), beta = F32(args.beta);
  if (t < CH) {
    bool in_chunk = int(t) < L;
    sh[SH_G + t] = in_chunk ? g.v[(tc + t) * nv + h] : 0.0;
    sh[SH_B + t] = in_chunk ? beta.v[(tc + t) * nv + h] : 0.0;
  }
  sync();
  if (t == 0u) {
    float acc = 0.0;
    for (uint r = 0u; r < CH; r++) {
      acc += sh[SH_G + r];
      sh[SH_G + r] = acc;
    }
  }
  sync();
  if (t < CH) rec_at(rec, REC_G).v[t] = sh[SH_G + t];

  // K K^T and Q K^T: thread (rb, cb) sums rows rb*8 .. +8 against columns cb*4 .. +4
  uint rb = t / 16u, cb = t % 16u;
  float kk[8][4], qk[8][4];
  [[unroll]] for (uint a = 0u; a < 8u; a++)
    [[unroll]] for (uint b = 0u; b < 4u; b++) kk[a][b] = qk[a][b] = 0.0;
  for (uint i0 = 0u; i0 < dk; i0 += 16u) {
    [[unroll]] for (uint u = 0u; u < 8u; u++) {  // k and q [16][CH] of columns i0 .. i0+16
      uint e = t + LOCAL_SIZE * u, i = e / CH, r = e % CH;
      float kv = 0.0, qv = 0.0;
      if (int(r) < L && i0 + i < dk) {
        kv = qkv_row(tc + r, C, kcol).v[i0 + i];
        qv = qkv_row(tc + r, C, qcol).v[i0 + i];
      }
      sh[SH_X + i * CH + r] = kv;
      sh[SH_X + 1024u + i * CH + r] = qv;
    }
    sync();
    for (uint i = 0u; i < 16u; i++) {
      float kj[4];
      [[unroll]] for (uint b = 0u; b < 4u; b++) kj[b] = sh[SH_X + i * CH + cb * 4u + b];
      [[unroll]] for (uint a = 0u; a < 8u; a++) {
        float kr = sh[SH_X + i * CH + rb * 8u + a], qr = sh[SH_X + 1024u + i * CH + rb * 8u + a];
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
          kk[a][b] += kr * kj[b];
          qk[a][b] += qr * kj[b];
        }
      }
    }
    sync();
  }
  F32 m = rec_at(rec, REC_M);
  [[unroll]] for (uint a = 0u; a < 8u; a++)
    [[unroll]] for (uint b = 0u; b < 4u; b++) {
      uint r = rb * 8u + a, j = cb * 4u + b;
      float e = j <= r && int(r) < L ? exp(sh[SH_G + r] - sh[SH_G + j]) : 0.0;
      sh[SH_A + r * TROW + j] = j < r ? sh[SH_B + r] * kk[a][b] * e : 0.0;
      m.v[r * CH + j] = qk[a][b] * e;
    }
  sync();

  // T = (I + A)^-1 by forward substitution, row r in place of A's once rows < r are T's:
  // T[r][j] = -A[r][j] - sum_{j < m < r} A[r][m] T[m][j].  Rows from L on stay zero.
  for (uint r = 1u; r < uint(L); r++) {
    float val = 0.0;
    if (t < r) {
      val = -sh[SH_A + r * TROW + t];
      for (uint mm = t + 1u; mm < r; mm++) val -= sh[SH_A + r * TROW + mm] * sh[SH_A + mm * TROW + t];
    }
    sync();
    if (t < r) sh[SH_A + r * TROW + t] = val;
    sync();
  }

  // W = T X with X_j = beta_j e^(G_j) k_j, then U = T X with X_j = beta_j v_j, 16 columns a
  // slice: thread (rg, ic) makes rows rg*8 .. +8 of column ic.
  uint ic = t % 16u, rg = t / 16u;
  for (uint pass = 0u; pass < 2u; pass++) {
    uint width = pass == 0u ? dk : dv, col = pass == 0u ? kcol : vcol;
    F32 out_ = rec_at(rec, pass == 0u ? REC_W : REC_U);
    for (uint c0 = 0u; c0 < width; c0 += 16u) {
      [[unroll]] for (uint u = 0u; u < 8u; u++) {
        uint e = t + LOCAL_SIZE * u, j = e / 16u, c = e % 16u;
        float x = 0.0;
        if (int(j) < L && c0 + c < width) {
          x = sh[SH_B + j] * qkv_row(tc + j, C, col).v[c0 + c];
          if (pass == 0u) x *= exp(sh[SH_G + j]);
        }
        sh[SH_X + j * 16u + c] = x;
      }
      sync();
      float acc[8];
      [[unroll]] for (uint a = 0u; a < 8u; a++) acc[a] = 0.0;
      for (uint j = 0u; j < uint(L); j++) {
        float x = sh[SH_X + j * 16u + ic];
        [[unroll]] for (uint a = 0u; a < 8u; a++) {
          uint r = rg * 8u + a;
          float tr = r == j ? 1.0 : j < r ? sh[SH_A + r * TROW + j] : 0.0;
          acc[a] += tr * x;
        }
      }
      if (c0 + ic < width)
        [[unroll]] for (uint a = 0u; a < 8u; a++) out_.v[(rg * 8u + a) * width + c0 + ic] = acc[a];
      sync();
    }
  }
}

void phase1(uint V) {
  uint nk = args.nk, nv = args.nv, dk = args.dk, dv = args.dv, t = gl_LocalInvocationID.x;
  uint ncb = (dv + V - 1u) / V, b = gl_WorkGroupID.x;
  if (b >= args.s * nv * ncb) return;
  uint s = b / (nv * ncb), h = (b % (nv * ncb)) / ncb, c0 = (b % ncb) * V;
  I32 cu = I32(args.cu_seqlens);
  int t0 = cu.v[s], len = cu.v[s + 1u] - t0;
  if (len <= 0) return;  // an empty sequence leaves its state as it was
  uint nch = chunks_of(len), rec0 = 0u;
  for (uint i = 0u; i < s; i++) rec0 += chunks_of(cu.v[i + 1u] - cu.v[i]);
  uint first = 0u, last = nch;
  if (LOOP_CAP != 0u) {
    uint w = window_chunks(dk, V);
    first = gl_WorkGroupID.y * w;
    if (first >= nch) return;  // this sequence ended in an earlier window
    last = min(nch, first + w);
  }
  int slot = I32(args.slots).v[s];
  uint hk = h / (nv / nk), C = 2u * nk * dk + nv * dv, kcol = nk * dk + hk * dk, qcol = hk * dk;
  uint NRG = LOCAL_SIZE / V, c = t % V, rg = t / V;  // thread: column c, row group rg
  bool col_ok = c0 + c < dv;
  F32 st = f32_at(args.state, (uint64_t(max(slot, 0)) * nv + h) * dk * dv);

  for (uint e = t; e < dk * V; e += LOCAL_SIZE) {
    uint i = e / V, cc = e % V;
    float x = 0.0;
    if (c0 + cc < dv) {
      if (first > 0u)  // the state the window before left in its last two records
        x = rec_at((rec0 + first - 2u + i / CH) * nv + h, REC_U).v[(i % CH) * dv + c0 + cc];
      else if (slot >= 0)
        x = st.v[i * dv + c0 + cc];
    }
    sh[SH_S + e] = x;
  }

  for (uint ch = first; ch < last; ch++) {
    uint rec = (rec0 + ch) * nv + h, tc = uint(t0) + ch * CH;
    int L = min(int(CH), len - int(ch * CH));
    F32 W = rec_at(rec, REC_W), U = rec_at(rec, REC_U), M = rec_at(rec, REC_M);
    if (t < CH) sh[SH_G + t] = rec_at(rec, REC_G).v[t];
    sync();
    if (t < CH) sh[SH_B + t] = exp(sh[SH_G + uint(L) - 1u] - sh[SH_G + t]);

    // D = U - W S and (Q S) e^G for rows r = p*8*NRG + rg + NRG*k
    float qs[2][8];
    for (uint p = 0u; p < V / 16u; p++) {
      float d[8], q[8];
      uint qtok[8];
      [[unroll]] for (uint k = 0u; k < 8u; k++) {
        d[k] = q[k] = 0.0;
        qtok[k] = tc + min(p * 8u * NRG + rg + NRG * k, uint(L) - 1u);  // rows past L: q read, not used
      }
      for (uint i0 = 0u; i0 < dk; i0 += 4u) {  // dk % 8 == 0; 64 loads in flight, then the sums
        float wv[4][8], qv[4][8];
        [[unroll]] for (uint u = 0u; u < 4u; u++)
          [[unroll]] for (uint k = 0u; k < 8u; k++) {
            wv[u][k] = W.v[(p * 8u * NRG + rg + NRG * k) * dk + i0 + u];
            qv[u][k] = qkv_row(qtok[k], C, qcol).v[i0 + u];
          }
        [[unroll]] for (uint u = 0u; u < 4u; u++) {
          float sv = sh[SH_S + (i0 + u) * V + c];
          [[unroll]] for (uint k = 0u; k < 8u; k++) {
            d[k] += wv[u][k] * sv;
            q[k] += qv[u][k] * sv;
          }
        }
      }
      [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint r = p * 8u * NRG + rg + NRG * k;
        sh[SH_D + r * V + c] = col_ok ? U.v[r * dv + c0 + c] - d[k] : 0.0;
        qs[p][k] = int(r) < L ? q[k] * exp(sh[SH_G + r]) : 0.0;
      }
    }
    sync();

    // O = (Q S) e^G + M D
    for (uint p = 0u; p < V / 16u; p++) {
      float acc[8];
      [[unroll]] for (uint k = 0u; k < 8u; k++) acc[k] = qs[p][k];
      for (uint j0 = 0u; j0 < uint(L); j0 += 8u) {  // M's rows are whole (CH columns)
        float mv[8][8];
        [[unroll]] for (uint u = 0u; u < 8u; u++)
          [[unroll]] for (uint k = 0u; k < 8u; k++) mv[u][k] = M.v[(p * 8u * NRG + rg + NRG * k) * CH + j0 + u];
        [[unroll]] for (uint u = 0u; u < 8u; u++) {
          if (j0 + u < uint(L)) {
            float dj = sh[SH_D + (j0 + u) * V + c];
            [[unroll]] for (uint k = 0u; k < 8u; k++) acc[k] += mv[u][k] * dj;
          }
        }
      }
      [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint r = p * 8u * NRG + rg + NRG * k;
        if (col_ok && int(r) < L) bf16_at(args.o, (uint64_t(tc + r) * nv + h) * dv).v[c0 + c] = f32_to_bf16(acc[k]);
      }
    }

    // S' = e^(G_(L-1)) S + sum_j k_j e^(G_(L-1) - G_j) D_j for rows i = p*8*NRG + rg + NRG*k
    float eL = exp(sh[SH_G + uint(L) - 1u]);
    for (uint p = 0u; p * 8u * NRG < dk; p++) {
      float acc[8];
      [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint i = p * 8u * NRG + rg + NRG * k;
        acc[k] = i < dk ? sh[SH_S + i * V + c] * eL : 0.0;
      }
      for (uint j0 = 0u; j0 < uint(L); j0 += 8u) {  // 64 loads in flight, then the sums
        float kv[8][8];
        [[unroll]] for (uint u = 0u; u < 8u; u++)
          [[unroll]] for (uint k = 0u; k < 8u; k++) {
            uint i = p * 8u * NRG + rg + NRG * k;
            kv[u][k] = j0 + u < uint(L) && i < dk ? qkv_row(tc + j0 + u, C, kcol).v[i] : 0.0;
          }
        [[unroll]] for (uint u = 0u; u < 8u; u++) {
          if (j0 + u < uint(L)) {
            float dj = sh[SH_D + (j0 + u) * V + c] * sh[SH_B + j0 + u];
            [[unroll]] for (uint k = 0u; k < 8u; k++) {
              uint i = p * 8u * NRG + rg + NRG * k;
              if (i < dk) acc[k] += kv[u][k] * dj;
            }
          }
        }
      }
      [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint i = p * 8u * NRG + rg + NRG * k;
        if (i < dk) sh[SH_S + i * V + c] = acc[k];
      }
    }
    sync();
  }

  for (uint e = t; e < dk * V; e += LOCAL_SIZE) {
    uint i = e / V, cc = e % V;
    if (c0 + cc >= dv) continue;
    if (last < nch)  // hand the state to the next window (vk_pipeline.c's windows)
      rec_at((rec0 + last - 2u + i / CH) * nv + h, REC_U).v[(i % CH) * dv + c0 + cc] = sh[SH_S + e];
    else if (slot >= 0)
      st.v[i * dv + c0 + cc] = sh[SH_S + e];
  }
}

void main() {
  // kernels.def: dk, dv <= 128 and multiples of 8 (the ops take delta_rule_prefill otherwise)
  if (args.nv == 0u || args.nk == 0u || args.nv < args.nk || args.dk == 0u || args.dk > 128u ||
      args.dv == 0u || args.dv > 128u || args.dk % 8u != 0u || args.dv % 8u != 0u)
    return;
  if (args.phase == 0u)
    phase0();
  else
    phase1(args.phase == 2u ? 32u : 16u);
}
