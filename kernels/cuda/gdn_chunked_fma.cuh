/* gdn_chunked.delta_rule_prefill_chunked for GPUs without the mma.sync path (the HIP build):
 * the same chunks of 64 tokens and WY form as gdn_chunked.cu, every product on plain f32
 * FMAs, as kernels/vulkan/delta_rule_prefill_chunked.comp computes it.  For a chunk of L
 * tokens of value head h starting from state S [dk, dv], G_r = g_0 + ... + g_r:
 *   A[r][j] = beta_r (k_r . k_j) e^(G_r - G_j)  (j < r),   T = (I + A)^-1
 *   W = T diag(beta) (k_j e^(G_j))_j,   U = T diag(beta) V,   M[r][j] = (q_r . k_j) e^(G_r - G_j)  (j <= r)
 *   D = U - W S,   O = diag(e^(G_r)) Q S + M D,   S' = e^(G_(L-1)) S + sum_j k_j e^(G_(L-1) - G_j) D_j
 * phase 0 (grid.x = NC*nv) writes record c*nv + h of ws for chunk c (chunks numbered sequence
 * after sequence) and value head h: W, U, M and G, rows from L on zero.  phase 1 (grid.x =
 * S*nv*ceil(dv/V), V = 16 or 32 told apart by grid.x) runs a sequence's chunks in order with
 * the block's [dk, V] columns of S in shared memory.
 *
 * Written in the subset of C11 and CUDA C++ that both compile, so that tests/unit/
 * test_chunked_fma.c runs this very code on the host (a thread per GPU thread, a barrier
 * for the block's): the includer defines CFMA_FN (function qualifiers), CFMA_SYNC() (the
 * block barrier), CFMA_TID, CFMA_BID, CFMA_NBLOCKS (threadIdx.x, blockIdx.x, gridDim.x),
 * CFMA_UNROLL (an unroll pragma or nothing) and CFMA_BF16(f) (bf16 bits, round to nearest
 * even).  A block is CFMA_BLOCK threads; early returns are the whole block's. */
#ifndef METRALE_GDN_CHUNKED_FMA_CUH
#define METRALE_GDN_CHUNKED_FMA_CUH

#define CFMA_BLOCK 128u
#define CFMA_CH 64u
#define CFMA_REC_FLOATS 36896u /* kernels.def: 147584 bytes a (chunk, value head) record */
#define CFMA_REC_W 0u          /* W [CH][dk] */
#define CFMA_REC_U 8192u       /* U [CH][dv] */
#define CFMA_REC_M 16384u      /* M [CH][CH] */
#define CFMA_REC_G 20480u      /* G [CH] */

/* The block's shared floats, one pool for both phases. */
#define CFMA_POOL_FLOATS 6336u
#define CFMA_SH_A 0u     /* phase 0: A, then T below its unit diagonal, [CH][CH + 1] */
#define CFMA_SH_X 4160u  /* phase 0: k and q slices [16][CH] each, then X [CH][16] */
#define CFMA_SH_S 0u     /* phase 1: the block's state columns [dk][V] */
#define CFMA_SH_D 4096u  /* phase 1: D [CH][V] */
#define CFMA_SH_G 6208u  /* G [CH] */
#define CFMA_SH_B 6272u  /* phase 0: beta [CH]; phase 1: e^(G_(L-1) - G_j) [CH] */
#define CFMA_TROW (CFMA_CH + 1u)

typedef struct cfma_args {
  uint16_t *o;            /* bf16 [T, nv, dv] */
  const float *qkv;       /* [T, 2 nk dk + nv dv] */
  const float *g, *beta;  /* [T, nv] */
  float *state;           /* [n_slots, nv, dk, dv] */
  const int32_t *cu_seqlens, *slots;
  float *ws;
  unsigned s, nk, nv, dk, dv;
} cfma_args;

CFMA_FN unsigned cfma_chunks(int len) { return len > 0 ? ((unsigned)len + CFMA_CH - 1u) / CFMA_CH : 0u; }
CFMA_FN float *cfma_rec(const cfma_args *a, unsigned rec, unsigned off) {
  return a->ws + (uint64_t)rec * CFMA_REC_FLOATS + off;
}
/* row `tok` of qkv, from column `col` on */
CFMA_FN const float *cfma_row(const cfma_args *a, unsigned tok, unsigned col) {
  return a->qkv + (uint64_t)tok * (2u * a->nk * a->dk + a->nv * a->dv) + col;
}

CFMA_FN void cfma_phase0(float *sh, const cfma_args *a) {
  const unsigned nk = a->nk, nv = a->nv, dk = a->dk, dv = a->dv, t = CFMA_TID;
  const unsigned ci = CFMA_BID / nv, h = CFMA_BID % nv;
  unsigned left = ci, tc = 0u;
  int L = 0;
  for (unsigned s = 0u; s < a->s; s++) { /* the chunk's sequence (the same for the whole block) */
    const int len = a->cu_seqlens[s + 1u] - a->cu_seqlens[s];
    const unsigned n = cfma_chunks(len);
    if (left < n) {
      tc = (unsigned)a->cu_seqlens[s] + left * CFMA_CH;
      L = len - (int)(left * CFMA_CH) < (int)CFMA_CH ? len - (int)(left * CFMA_CH) : (int)CFMA_CH;
      break;
    }
    left -= n;
  }
  if (L <= 0) return; /* past the last chunk */
  const unsigned hk = h / (nv / nk), rec = ci * nv + h;
  const unsigned kcol = nk * dk + hk * dk, qcol = hk * dk, vcol = 2u * nk * dk + h * dv;

  if (t < CFMA_CH) {
    const int in_chunk = (int)t < L;
    sh[CFMA_SH_G + t] = in_chunk ? a->g[(uint64_t)(tc + t) * nv + h] : 0.0f;
    sh[CFMA_SH_B + t] = in_chunk ? a->beta[(uint64_t)(tc + t) * nv + h] : 0.0f;
  }
  CFMA_SYNC();
  if (t == 0u) {
    float acc = 0.0f;
    for (unsigned r = 0u; r < CFMA_CH; r++) {
      acc += sh[CFMA_SH_G + r];
      sh[CFMA_SH_G + r] = acc;
    }
  }
  CFMA_SYNC();
  if (t < CFMA_CH) cfma_rec(a, rec, CFMA_REC_G)[t] = sh[CFMA_SH_G + t];

  /* K K^T and Q K^T: thread (rb, cb) sums rows rb*8 .. +8 against columns cb*4 .. +4 */
  const unsigned rb = t / 16u, cb = t % 16u;
  float kk[8][4], qk[8][4];
  CFMA_UNROLL for (unsigned i = 0u; i < 8u; i++)
    CFMA_UNROLL for (unsigned b = 0u; b < 4u; b++) kk[i][b] = qk[i][b] = 0.0f;
  for (unsigned i0 = 0u; i0 < dk; i0 += 16u) {
    CFMA_UNROLL for (unsigned u = 0u; u < 8u; u++) { /* k and q [16][CH] of columns i0 .. i0+16 */
      const unsigned e = t + CFMA_BLOCK * u, i = e / CFMA_CH, r = e % CFMA_CH;
      float kv = 0.0f, qv = 0.0f;
      if ((int)r < L && i0 + i < dk) {
        kv = cfma_row(a, tc + r, kcol)[i0 + i];
        qv = cfma_row(a, tc + r, qcol)[i0 + i];
      }
      sh[CFMA_SH_X + i * CFMA_CH + r] = kv;
      sh[CFMA_SH_X + 1024u + i * CFMA_CH + r] = qv;
    }
    CFMA_SYNC();
    for (unsigned i = 0u; i < 16u; i++) {
      float kj[4];
      CFMA_UNROLL for (unsigned b = 0u; b < 4u; b++) kj[b] = sh[CFMA_SH_X + i * CFMA_CH + cb * 4u + b];
      CFMA_UNROLL for (unsigned r = 0u; r < 8u; r++) {
        const float kr = sh[CFMA_SH_X + i * CFMA_CH + rb * 8u + r];
        const float qr = sh[CFMA_SH_X + 1024u + i * CFMA_CH + rb * 8u + r];
        CFMA_UNROLL for (unsigned b = 0u; b < 4u; b++) {
          kk[r][b] += kr * kj[b];
          qk[r][b] += qr * kj[b];
        }
      }
    }
    CFMA_SYNC();
  }
  float *m = cfma_rec(a, rec, CFMA_REC_M);
  CFMA_UNROLL for (unsigned i = 0u; i < 8u; i++)
    CFMA_UNROLL for (unsigned b = 0u; b < 4u; b++) {
      const unsigned r = rb * 8u + i, j = cb * 4u + b;
      const float e = j <= r && (int)r < L ? expf(sh[CFMA_SH_G + r] - sh[CFMA_SH_G + j]) : 0.0f;
      sh[CFMA_SH_A + r * CFMA_TROW + j] = j < r ? sh[CFMA_SH_B + r] * kk[i][b] * e : 0.0f;
      m[r * CFMA_CH + j] = qk[i][b] * e;
    }
  CFMA_SYNC();

  /* T = (I + A)^-1 by forward substitution, row r in place of A's once rows < r are T's:
   * T[r][j] = -A[r][j] - sum_{j < m < r} A[r][m] T[m][j].  Rows from L on stay zero. */
  for (unsigned r = 1u; r < (unsigned)L; r++) {
    float val = 0.0f;
    if (t < r) {
      val = -sh[CFMA_SH_A + r * CFMA_TROW + t];
      for (unsigned mm = t + 1u; mm < r; mm++)
        val -= sh[CFMA_SH_A + r * CFMA_TROW + mm] * sh[CFMA_SH_A + mm * CFMA_TROW + t];
    }
    CFMA_SYNC();
    if (t < r) sh[CFMA_SH_A + r * CFMA_TROW + t] = val;
    CFMA_SYNC();
  }

  /* W = T X with X_j = beta_j e^(G_j) k_j, then U = T X with X_j = beta_j v_j, 16 columns a
   * slice: thread (rg, ic) makes rows rg*8 .. +8 of column ic. */
  const unsigned ic = t % 16u, rg = t / 16u;
  for (unsigned pass = 0u; pass < 2u; pass++) {
    const unsigned width = pass == 0u ? dk : dv, col = pass == 0u ? kcol : vcol;
    float *out = cfma_rec(a, rec, pass == 0u ? CFMA_REC_W : CFMA_REC_U);
    for (unsigned c0 = 0u; c0 < width; c0 += 16u) {
      CFMA_UNROLL for (unsigned u = 0u; u < 8u; u++) {
        const unsigned e = t + CFMA_BLOCK * u, j = e / 16u, c = e % 16u;
        float x = 0.0f;
        if ((int)j < L && c0 + c < width) {
          x = sh[CFMA_SH_B + j] * cfma_row(a, tc + j, col)[c0 + c];
          if (pass == 0u) x *= expf(sh[CFMA_SH_G + j]);
        }
        sh[CFMA_SH_X + j * 16u + c] = x;
      }
      CFMA_SYNC();
      float acc[8];
      CFMA_UNROLL for (unsigned i = 0u; i < 8u; i++) acc[i] = 0.0f;
      for (unsigned j = 0u; j < (unsigned)L; j++) {
        const float x = sh[CFMA_SH_X + j * 16u + ic];
        CFMA_UNROLL for (unsigned i = 0u; i < 8u; i++) {
          const unsigned r = rg * 8u + i;
          const float tr = r == j ? 1.0f : j < r ? sh[CFMA_SH_A + r * CFMA_TROW + j] : 0.0f;
          acc[i] += tr * x;
        }
      }
      if (c0 + ic < width)
        CFMA_UNROLL for (unsigned i = 0u; i < 8u; i++) out[(rg * 8u + i) * width + c0 + ic] = acc[i];
      CFMA_SYNC();
    }
  }
}

CFMA_FN void cfma_phase1(float *sh, const cfma_args *a, unsigned V) {
  const unsigned nk = a->nk, nv = a->nv, dk = a->dk, dv = a->dv, t = CFMA_TID;
  const unsigned ncb = (dv + V - 1u) / V, b = CFMA_BID;
  if (b >= a->s * nv * ncb) return;
  const unsigned s = b / (nv * ncb), h = (b % (nv * ncb)) / ncb, c0 = (b % ncb) * V;
  const int t0 = a->cu_seqlens[s], len = a->cu_seqlens[s + 1u] - t0;
  if (len <= 0) return; /* an empty sequence leaves its state as it was */
  const unsigned nch = cfma_chunks(len);
  unsigned rec0 = 0u;
  for (unsigned i = 0u; i < s; i++) rec0 += cfma_chunks(a->cu_seqlens[i + 1u] - a->cu_seqlens[i]);
  const int slot = a->slots[s];
  const unsigned hk = h / (nv / nk), kcol = nk * dk + hk * dk, qcol = hk * dk;
  const unsigned NRG = CFMA_BLOCK / V, c = t % V, rg = t / V; /* thread: column c, row group rg */
  const int col_ok = c0 + c < dv;
  float *st = a->state + ((uint64_t)(slot > 0 ? slot : 0) * nv + h) * dk * dv;

  for (unsigned e = t; e < dk * V; e += CFMA_BLOCK) {
    const unsigned i = e / V, cc = e % V;
    sh[CFMA_SH_S + e] = c0 + cc < dv && slot >= 0 ? st[(uint64_t)i * dv + c0 + cc] : 0.0f;
  }

  for (unsigned ch = 0u; ch < nch; ch++) {
    const unsigned rec = (rec0 + ch) * nv + h, tc = (unsigned)t0 + ch * CFMA_CH;
    const int L = len - (int)(ch * CFMA_CH) < (int)CFMA_CH ? len - (int)(ch * CFMA_CH) : (int)CFMA_CH;
    const float *W = cfma_rec(a, rec, CFMA_REC_W), *U = cfma_rec(a, rec, CFMA_REC_U);
    const float *M = cfma_rec(a, rec, CFMA_REC_M);
    if (t < CFMA_CH) sh[CFMA_SH_G + t] = cfma_rec(a, rec, CFMA_REC_G)[t];
    CFMA_SYNC();
    if (t < CFMA_CH) sh[CFMA_SH_B + t] = expf(sh[CFMA_SH_G + (unsigned)L - 1u] - sh[CFMA_SH_G + t]);

    /* D = U - W S and (Q S) e^G for rows r = p*8*NRG + rg + NRG*k */
    float qs[2][8];
    for (unsigned p = 0u; p < V / 16u; p++) {
      float d[8], q[8];
      const float *qrow[8];
      CFMA_UNROLL for (unsigned k = 0u; k < 8u; k++) {
        const unsigned r = p * 8u * NRG + rg + NRG * k;
        d[k] = q[k] = 0.0f;
        qrow[k] = cfma_row(a, tc + (r < (unsigned)L ? r : (unsigned)L - 1u), qcol); /* rows past L: read, not used */
      }
      for (unsigned i = 0u; i < dk; i++) {
        const float sv = sh[CFMA_SH_S + i * V + c];
        CFMA_UNROLL for (unsigned k = 0u; k < 8u; k++) {
          const unsigned r = p * 8u * NRG + rg + NRG * k;
          d[k] += W[r * dk + i] * sv;
          q[k] += qrow[k][i] * sv;
        }
      }
      CFMA_UNROLL for (unsigned k = 0u; k < 8u; k++) {
        const unsigned r = p * 8u * NRG + rg + NRG * k;
        sh[CFMA_SH_D + r * V + c] = col_ok ? U[r * dv + c0 + c] - d[k] : 0.0f;
        qs[p][k] = (int)r < L ? q[k] * expf(sh[CFMA_SH_G + r]) : 0.0f;
      }
    }
    CFMA_SYNC();

    /* O = (Q S) e^G + M D */
    for (unsigned p = 0u; p < V / 16u; p++) {
      float acc[8];
      CFMA_UNROLL for (unsigned k = 0u; k < 8u; k++) acc[k] = qs[p][k];
      for (unsigned j = 0u; j < (unsigned)L; j++) {
        const float dj = sh[CFMA_SH_D + j * V + c];
        CFMA_UNROLL for (unsigned k = 0u; k < 8u; k++) acc[k] += M[(p * 8u * NRG + rg + NRG * k) * CFMA_CH + j] * dj;
      }
      CFMA_UNROLL for (unsigned k = 0u; k < 8u; k++) {
        const unsigned r = p * 8u * NRG + rg + NRG * k;
        if (col_ok && (int)r < L) a->o[((uint64_t)(tc + r) * nv + h) * dv + c0 + c] = CFMA_BF16(acc[k]);
      }
    }

    /* S' = e^(G_(L-1)) S + sum_j k_j e^(G_(L-1) - G_j) D_j for rows i = p*8*NRG + rg + NRG*k */
    const float eL = expf(sh[CFMA_SH_G + (unsigned)L - 1u]);
    for (unsigned p = 0u; p * 8u * NRG < dk; p++) {
      float acc[8];
      CFMA_UNROLL for (unsigned k = 0u; k < 8u; k++) {
        const unsigned i = p * 8u * NRG + rg + NRG * k;
        acc[k] = i < dk ? sh[CFMA_SH_S + i * V + c] * eL : 0.0f;
      }
      for (unsigned j = 0u; j < (unsigned)L; j++) {
        const float dj = sh[CFMA_SH_D + j * V + c] * sh[CFMA_SH_B + j];
        const float *kr = cfma_row(a, tc + j, kcol);
        CFMA_UNROLL for (unsigned k = 0u; k < 8u; k++) {
          const unsigned i = p * 8u * NRG + rg + NRG * k;
          if (i < dk) acc[k] += kr[i] * dj;
        }
      }
      CFMA_UNROLL for (unsigned k = 0u; k < 8u; k++) {
        const unsigned i = p * 8u * NRG + rg + NRG * k;
        if (i < dk) sh[CFMA_SH_S + i * V + c] = acc[k];
      }
    }
    CFMA_SYNC();
  }

  for (unsigned e = t; e < dk * V; e += CFMA_BLOCK) {
    const unsigned i = e / V, cc = e % V;
    if (c0 + cc < dv && slot >= 0) st[(uint64_t)i * dv + c0 + cc] = sh[CFMA_SH_S + e];
  }
}

/* Both phases; the heads kernels.def allows (dk, dv <= 128, multiples of 8), else nothing. */
CFMA_FN void cfma_run(float *sh, const cfma_args *a, unsigned phase) {
  if (a->nv == 0u || a->nk == 0u || a->nv < a->nk || a->nv % a->nk != 0u || a->dk == 0u || a->dk > 128u ||
      a->dv == 0u || a->dv > 128u || a->dk % 8u != 0u || a->dv % 8u != 0u)
    return;
  if (phase == 0u)
    cfma_phase0(sh, a);
  else if (phase == 1u) {
    const unsigned heads = a->s * a->nv;
    if (CFMA_NBLOCKS == heads * ((a->dv + 15u) / 16u))
      cfma_phase1(sh, a, 16u);
    else if (CFMA_NBLOCKS == heads * ((a->dv + 31u) / 32u))
      cfma_phase1(sh, a, 32u);
  }
}

#endif
