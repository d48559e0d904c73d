/* The portable chunked delta rule of kernels/cuda/gdn_chunked_fma.cuh (the HIP build's
 * gdn_chunked.delta_rule_prefill_chunked; no AMD GPU has ever run it) run on the host: the
 * very source, a POSIX thread per GPU thread and a barrier for __syncthreads, one block after
 * another, its shared memory filled with NaN before each block so that a read of something
 * not yet written shows.  Checked against the token recurrence in double, on the shapes of the
 * conformance suite's chunked cases (sequences ending before, at and after chunk boundaries,
 * empty ones, padding slots, 16 and 32 value columns a phase-1 block). */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance_util.h"
#include "metrale/bf16.h"

static _Thread_local unsigned emu_tid;
static unsigned emu_bid, emu_nblocks;
static pthread_barrier_t emu_bar;

#define CFMA_FN static
#define CFMA_SYNC() pthread_barrier_wait(&emu_bar)
#define CFMA_TID emu_tid
#define CFMA_BID emu_bid
#define CFMA_NBLOCKS emu_nblocks
#define CFMA_UNROLL
#define CFMA_BF16(f) metrale_f32_to_bf16(f)
#include "../../kernels/cuda/gdn_chunked_fma.cuh"

_Static_assert(CFMA_REC_FLOATS * 4 == 147584 && CFMA_REC_U + CFMA_CH * 128 <= CFMA_REC_M &&
                   CFMA_REC_M + CFMA_CH * CFMA_CH <= CFMA_REC_G && CFMA_REC_G + CFMA_CH <= CFMA_REC_FLOATS,
               "kernels.def's record: W, U, M and G of heads up to 128 fit in it");

typedef struct {
  float *sh;
  const cfma_args *a;
  unsigned phase, tid;
} emu_thread;

static void *emu_main(void *p) {
  const emu_thread *e = p;
  emu_tid = e->tid;
  cfma_run(e->sh, e->a, e->phase);
  return NULL;
}

/* One launch of `grid` blocks of CFMA_BLOCK threads. */
static void emu_launch(const cfma_args *a, unsigned phase, unsigned grid) {
  static float sh[CFMA_POOL_FLOATS];
  pthread_t th[CFMA_BLOCK];
  emu_thread et[CFMA_BLOCK];
  emu_nblocks = grid;
  for (unsigned b = 0; b < grid; b++) {
    emu_bid = b;
    for (unsigned i = 0; i < CFMA_POOL_FLOATS; i++) sh[i] = NAN;
    cr_assert_eq(pthread_barrier_init(&emu_bar, NULL, CFMA_BLOCK), 0);
    for (unsigned t = 0; t < CFMA_BLOCK; t++) {
      et[t] = (emu_thread){sh, a, phase, t};
      cr_assert_eq(pthread_create(&th[t], NULL, emu_main, &et[t]), 0);
    }
    for (unsigned t = 0; t < CFMA_BLOCK; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&emu_bar);
  }
}

typedef struct {
  unsigned nk, nv, dk, dv;
} heads;

/* Runs sequences `lens` through both phases (V value columns a phase-1 block) and checks o and
 * the states against the token recurrence in double. */
static void run_case(const heads *h, const int32_t *lens, unsigned nseq, unsigned V) {
  const uint64_t seed = mt_fresh_seed();
  mt_rng rng;
  mt_rng_init(&rng, seed);
  const unsigned C = 2 * h->nk * h->dk + h->nv * h->dv, per = h->dk * h->dv, n_slots = nseq + 2;
  int32_t cu[8] = {0}, slots[8];
  for (unsigned s = 0; s < nseq; s++) cu[s + 1] = cu[s] + lens[s];
  const unsigned T = (unsigned)cu[nseq];
  float *qkv = calloc((size_t)T * C + 1, sizeof *qkv), *g = calloc((size_t)T * h->nv + 1, sizeof *g);
  float *beta = calloc((size_t)T * h->nv + 1, sizeof *beta);
  float *state = calloc((size_t)n_slots * h->nv * per, sizeof *state);
  double *state_ref = calloc((size_t)n_slots * h->nv * per, sizeof *state_ref);
  uint16_t *o = calloc((size_t)T * h->nv * h->dv + 1, sizeof *o);
  double *o_ref = calloc((size_t)T * h->nv * h->dv + 1, sizeof *o_ref);
  cr_assert(qkv && g && beta && state && state_ref && o && o_ref);
  for (unsigned t = 0; t < T; t++) /* unit q (times dk^-1/2) and k, v in [-1, 1] */
    for (unsigned j = 0; j < 2 * h->nk; j++) {
      float *x = qkv + (size_t)t * C + j * h->dk;
      double ss = 0;
      for (unsigned i = 0; i < h->dk; i++) x[i] = (float)mt_uniform(&rng, -1, 1), ss += (double)x[i] * x[i];
      for (unsigned i = 0; i < h->dk; i++) x[i] = (float)(x[i] / sqrt(ss) / (j < h->nk ? sqrt(h->dk) : 1.0));
    }
  for (unsigned t = 0; t < T; t++)
    for (unsigned j = 2 * h->nk * h->dk; j < C; j++) qkv[(size_t)t * C + j] = (float)mt_uniform(&rng, -1, 1);
  for (unsigned i = 0; i < T * h->nv; i++) {
    g[i] = (float)-exp(mt_uniform(&rng, log(0.01), log(2.0)));
    beta[i] = (float)mt_uniform(&rng, 0.02, 0.98);
  }
  for (size_t i = 0; i < (size_t)n_slots * h->nv * per; i++) state[i] = (float)mt_uniform(&rng, -0.5, 0.5), state_ref[i] = state[i];
  for (unsigned s = 0; s < nseq; s++) slots[s] = s == 0 ? -1 : (int32_t)(n_slots - 1 - s); /* the first pads */

  /* the token recurrence (mt_delta_step) in double */
  double *S = malloc(per * sizeof *S);
  cr_assert(S);
  for (unsigned s = 0; s < nseq; s++)
    for (unsigned vh = 0; vh < h->nv; vh++) {
      double *slot_state = state_ref + ((size_t)(slots[s] < 0 ? 0 : slots[s]) * h->nv + vh) * per;
      for (unsigned i = 0; i < per; i++) S[i] = slots[s] < 0 ? 0.0 : slot_state[i];
      const unsigned hk = vh / (h->nv / h->nk);
      for (int t = cu[s]; t < cu[s + 1]; t++) {
        const float *row = qkv + (size_t)t * C;
        mt_delta_step(S, o_ref + ((size_t)t * h->nv + vh) * h->dv, row + hk * h->dk,
                      row + h->nk * h->dk + hk * h->dk, row + 2 * h->nk * h->dk + vh * h->dv,
                      g[(size_t)t * h->nv + vh], beta[(size_t)t * h->nv + vh], h->dk, h->dv);
      }
      if (slots[s] >= 0) memcpy(slot_state, S, per * sizeof *S);
    }
  free(S);

  unsigned nc = (T + 63 * nseq) / 64;
  if (nc > T) nc = T;
  float *ws = malloc(((size_t)nc * h->nv + 1) * CFMA_REC_FLOATS * sizeof *ws);
  cr_assert(ws);
  for (size_t i = 0; i < ((size_t)nc * h->nv + 1) * CFMA_REC_FLOATS; i++) ws[i] = NAN; /* unwritten records show */
  const cfma_args a = {o, qkv, g, beta, state, cu, slots, ws, nseq, h->nk, h->nv, h->dk, h->dv};
  emu_launch(&a, 0, nc * h->nv);
  emu_launch(&a, 1, nseq * h->nv * ((h->dv + V - 1) / V));

  char shape[128];
  snprintf(shape, sizeof shape, "seed=%llu V=%u S=%u T=%u nk=%u nv=%u dk=%u dv=%u", (unsigned long long)seed, V,
           nseq, T, h->nk, h->nv, h->dk, h->dv);
  size_t bad = 0;
  const double e_o = mt_nmse_bf16(o, o_ref, (size_t)T * h->nv * h->dv, &bad);
  cr_expect(bad == 0 && e_o <= 1e-5, "%s: o NMSE %g, %zu values not finite", shape, e_o, bad);
  const double e_s = mt_nmse_f32(state, state_ref, (size_t)n_slots * h->nv * per, &bad);
  cr_expect(bad == 0 && e_s <= 1e-10, "%s: state NMSE %g, %zu values not finite", shape, e_s, bad);
  free(qkv), free(g), free(beta), free(state), free(state_ref), free(o), free(o_ref), free(ws);
}

Test(chunked_fma, matches_the_token_recurrence, .timeout = 600) {
  static const heads hs[] = {{1, 1, 16, 16}, {1, 2, 24, 16}, {2, 8, 16, 24}};
  static const int32_t lens_a[] = {0, 1, 63, 64, 65, 200}, lens_b[] = {5, 130}, lens_c[] = {30, 128, 0, 191};
  for (unsigned hi = 0; hi < sizeof hs / sizeof hs[0]; hi++)
    for (unsigned V = 16; V <= 32; V += 16) {
      run_case(&hs[hi], lens_a, 6, V);
      run_case(&hs[hi], lens_b, 2, V);
      run_case(&hs[hi], lens_c, 4, V);
    }
}

/* The a3b head size, where every slice loop runs its full length. */
Test(chunked_fma, heads_of_128, .timeout = 600) {
  static const heads h = {1, 2, 128, 128};
  static const int32_t lens[] = {70, 64};
  run_case(&h, lens, 2, 16);
  run_case(&h, lens, 2, 32);
}
