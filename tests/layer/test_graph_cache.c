/* The layer's cache of recorded decode steps (core/src/layers/qwen3_ssm/graphs.c), white box:
 * how many steps it records and replays while a serving loop goes round more keys (batch
 * sizes, buffers) than it holds, and that its replays give the eager launches' bits.
 *
 * The backend's graph entries are counted through a copy of its vtable.  A backend without
 * graphs (cpu, vulkan) gets graph entries here that record the launches and replay them in
 * the order they were made, so the cache is tested on every backend; on CUDA the real
 * recordings are counted. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "layer_util.h"
#include "layers/qwen3_ssm/layer.h" /* QWEN3_SSM_GRAPHS, QWEN3_SSM_GRAPH_IDLE */

#define CHECK(expr)                                                                   \
  do {                                                                                \
    metrale_status s_ = (expr);                                                       \
    cr_assert(s_ == METRALE_OK, "%s: %s", #expr, metrale_status_message(s_));         \
  } while (0)

/* ---- graph entries, counted (and recorded here where the backend has none) ---------------- */

typedef struct rec_launch {
  gpu_kernel kernel;
  gpu_dim3 grid, block;
  uint32_t shared_bytes, nargs;
  gpu_stream stream; /* NULL here: the stream the graph is launched on */
  gpu_arg *args;
} rec_launch;

typedef struct rec_graph {
  rec_launch *l;
  unsigned n, cap;
} rec_graph;

static const gpu_backend_vtable *inner;
static struct {
  unsigned begins, launches, destroys, misuses;
  rec_graph *rec;    /* the recording under way (recorded here) */
  gpu_stream origin; /* its stream */
} G;

static metrale_status rec_launch_entry(gpu_backend *be, gpu_kernel k, gpu_dim3 grid, gpu_dim3 block,
                                       uint32_t shared_bytes, gpu_stream st, const gpu_arg *args, uint32_t nargs) {
  if (!G.rec) return inner->launch(be, k, grid, block, shared_bytes, st, args, nargs);
  rec_graph *g = G.rec;
  if (g->n == g->cap) {
    g->cap = g->cap ? 2 * g->cap : 16;
    g->l = realloc(g->l, g->cap * sizeof *g->l);
    cr_assert(g->l);
  }
  rec_launch *l = &g->l[g->n++];
  *l = (rec_launch){k, grid, block, shared_bytes, nargs, st == G.origin ? NULL : st, malloc(nargs * sizeof *args + 1)};
  cr_assert(l->args);
  memcpy(l->args, args, nargs * sizeof *args);
  return METRALE_OK;
}

/* Only launches (and stream waits) may be enqueued while recording (gpu_backend.h). */
static metrale_status misuse(const char *what) {
  G.misuses++;
  return METRALE_ERROR(FAILED_PRECONDITION, "%s while a decode step was being recorded", what);
}
static metrale_status rec_memset(gpu_backend *be, gpu_ptr d, uint8_t v, uint64_t n, gpu_stream st) {
  return G.rec ? misuse("memset") : inner->memset(be, d, v, n, st);
}
static metrale_status rec_h2d(gpu_backend *be, gpu_ptr d, const void *s, uint64_t n, gpu_stream st) {
  return G.rec ? misuse("copy_h2d") : inner->copy_h2d(be, d, s, n, st);
}
static metrale_status rec_d2h(gpu_backend *be, void *d, gpu_ptr s, uint64_t n, gpu_stream st) {
  return G.rec ? misuse("copy_d2h") : inner->copy_d2h(be, d, s, n, st);
}
static metrale_status rec_d2d(gpu_backend *be, gpu_ptr d, gpu_ptr s, uint64_t n, gpu_stream st) {
  return G.rec ? misuse("copy_d2d") : inner->copy_d2d(be, d, s, n, st);
}
static metrale_status rec_stream_sync(gpu_backend *be, gpu_stream st) {
  return G.rec ? misuse("stream_sync") : inner->stream_sync(be, st);
}
static metrale_status rec_sync(gpu_backend *be) { return G.rec ? misuse("sync") : inner->sync(be); }
/* Replayed in the order they were made, the launches keep every wait's order. */
static metrale_status rec_stream_wait(gpu_backend *be, gpu_stream waiter, gpu_stream signaler) {
  return G.rec ? METRALE_OK : inner->stream_wait(be, waiter, signaler);
}

static metrale_status rec_begin(gpu_backend *be, gpu_stream st) {
  (void)be;
  if (G.rec) return misuse("graph_begin");
  G.rec = calloc(1, sizeof *G.rec);
  cr_assert(G.rec);
  G.origin = st;
  G.begins++;
  return METRALE_OK;
}

static void rec_free(rec_graph *g) {
  for (unsigned i = 0; i < g->n; i++) free(g->l[i].args);
  free(g->l);
  free(g);
}

static metrale_status rec_end(gpu_backend *be, gpu_stream st, gpu_graph *out) {
  (void)be, (void)st;
  rec_graph *g = G.rec;
  G.rec = NULL;
  if (out)
    *out = (gpu_graph)(void *)g;
  else if (g)
    rec_free(g);
  return METRALE_OK;
}

static metrale_status rec_graph_launch(gpu_backend *be, gpu_graph graph, gpu_stream st) {
  G.launches++;
  const rec_graph *g = (const rec_graph *)(void *)graph;
  for (unsigned i = 0; i < g->n; i++) {
    const rec_launch *l = &g->l[i];
    METRALE_RETURN_IF_ERROR(
        inner->launch(be, l->kernel, l->grid, l->block, l->shared_bytes, l->stream ? l->stream : st, l->args, l->nargs));
  }
  return METRALE_OK;
}

static void rec_destroy(gpu_backend *be, gpu_graph graph) {
  (void)be;
  if (!graph) return;
  G.destroys++;
  rec_free((rec_graph *)(void *)graph);
}

/* The backend's own graph entries, counted. */
static metrale_status counted_begin(gpu_backend *be, gpu_stream st) {
  G.begins++;
  return inner->graph_begin(be, st);
}
static metrale_status counted_launch(gpu_backend *be, gpu_graph g, gpu_stream st) {
  G.launches++;
  return inner->graph_launch(be, g, st);
}
static void counted_destroy(gpu_backend *be, gpu_graph g) {
  if (g) G.destroys++;
  inner->graph_destroy(be, g);
}

/* Puts the counted (or recording) entries into a copy of be's vtable, kept in *vt. */
static void wrap_graphs(gpu_backend *be, gpu_backend_vtable *vt) {
  inner = be->vt;
  memset(&G, 0, sizeof G);
  *vt = *be->vt;
  if (inner->graph_begin) {
    vt->graph_begin = counted_begin;
    vt->graph_launch = counted_launch;
    vt->graph_destroy = counted_destroy;
  } else {
    vt->launch = rec_launch_entry;
    vt->memset = rec_memset;
    vt->copy_h2d = rec_h2d;
    vt->copy_d2h = rec_d2h;
    vt->copy_d2d = rec_d2d;
    vt->stream_sync = rec_stream_sync;
    vt->sync = rec_sync;
    if (inner->stream_wait) vt->stream_wait = rec_stream_wait;
    vt->graph_begin = rec_begin;
    vt->graph_end = rec_end;
    vt->graph_launch = rec_graph_launch;
    vt->graph_destroy = rec_destroy;
  }
  be->vt = vt;
}

/* ---- the steps ------------------------------------------------------------------------------ */

#define EXTRA 8u                    /* keys beyond the cache's in the second phase */
#define X_ROWS (QWEN3_SSM_GRAPHS + EXTRA)
#define N_SLOTS 3u
/* rounds of the third phase's keys after which every old recording has gone idle and been
 * replaced */
#define SETTLE_ROUNDS ((QWEN3_SSM_GRAPH_IDLE + QWEN3_SSM_GRAPHS - 1) / QWEN3_SSM_GRAPHS + 1)

typedef struct cache_env {
  metrale_device *dev;
  gpu_backend *be;
  metrale_qwen3_config cfg;
  metrale_qwen3_ssm_layer *layer;
  metrale_state_pool *pool;
  gpu_ptr x, y; /* x: X_ROWS rows, y: 2 rows (bf16) */
  metrale_bf16 *ys; /* every step's output row */
  unsigned step, steps;
} cache_env;

/* One decode step of batch 1 on input row x_row into output row y_row: its key is
 * (x_row, y_row); its slot goes round the pool, so the list changes every step. */
static void take_step(cache_env *e, uint32_t x_row, uint32_t y_row) {
  const uint64_t row = e->cfg.hidden_size;
  const int32_t slot = (int32_t)(e->step % N_SLOTS);
  cr_assert_lt(e->step, e->steps);
  CHECK(metrale_qwen3_ssm_decode(e->layer, e->pool, METRALE_PART_LAYER, &slot, 1, e->x + x_row * row * 2,
                                 e->y + y_row * row * 2, NULL));
  CHECK(e->be->vt->copy_d2h(e->be, e->ys + e->step * row, e->y + y_row * row * 2, row * 2, NULL));
  e->step++;
}

/* rounds times round the keys (x rows 0..nx-1, y_row) */
static void go_round(cache_env *e, uint32_t nx, uint32_t y_row, unsigned rounds) {
  for (unsigned r = 0; r < rounds; r++)
    for (uint32_t i = 0; i < nx; i++) take_step(e, i, y_row);
}

typedef struct counts {
  unsigned begins, launches, destroys;
} counts;

static counts since(const counts *before) {
  return (counts){G.begins - before->begins, G.launches - before->launches, G.destroys - before->destroys};
}

static counts now_counts(void) { return (counts){G.begins, G.launches, G.destroys}; }

/* The whole loop: three phases, with the cache's counts checked after each where graphs
 * are on. */
static void run_loop(cache_env *e, int graphs) {
  const unsigned K = QWEN3_SSM_GRAPHS;
  const int32_t all[N_SLOTS] = {0, 1, 2};
  CHECK(metrale_state_pool_reset(e->pool, all, N_SLOTS));
  e->step = 0;
  counts c0 = now_counts();
  /* 1: K keys three times round: each recorded once, then replayed */
  go_round(e, K, 0, 3);
  counts c = since(&c0);
  if (graphs) {
    cr_expect_eq(c.begins, K, "going round %u keys three times recorded %u steps (want each key once)", K,
                 c.begins);
    cr_expect_eq(c.launches, 3 * K, "going round %u keys three times replayed %u steps (want all %u)", K,
                 c.launches, 3 * K);
  }
  /* 2: K + EXTRA keys three times round: the K recordings stay and are replayed, the EXTRA run
   * eagerly (replacing the least recently used one every step would record every step) */
  c0 = now_counts();
  go_round(e, K + EXTRA, 0, 3);
  c = since(&c0);
  if (graphs) {
    cr_expect_eq(c.begins, 0, "going round %u keys, %u more than the cache, recorded %u steps (want none)",
                 K + EXTRA, EXTRA, c.begins);
    cr_expect_eq(c.launches, 3 * K, "going round %u keys three times replayed %u steps (want the cached %u keys "
                                    "every round: %u)",
                 K + EXTRA, c.launches, K, 3 * K);
  }
  /* 3: the loop moves on to K other keys (the other output row): the old recordings go idle
   * and are replaced, each new key recorded once; from then on every step is a replay */
  c0 = now_counts();
  const unsigned settle = SETTLE_ROUNDS;
  go_round(e, K, 1, settle);
  c = since(&c0);
  if (graphs) {
    cr_expect_eq(c.begins, K, "moving on to %u other keys recorded %u steps over %u rounds (want each once)", K,
                 c.begins, settle);
    cr_expect_eq(c.destroys, K, "moving on to %u other keys dropped %u recordings (want the %u old ones)", K,
                 c.destroys, K);
  }
  c0 = now_counts();
  go_round(e, K, 1, 1);
  c = since(&c0);
  if (graphs) cr_expect(c.begins == 0 && c.launches == K, "after moving on: %u recorded, %u replayed of %u steps",
                        c.begins, c.launches, K);
  CHECK(e->be->vt->stream_sync(e->be, NULL));
  cr_assert_eq(e->step, e->steps);
}

static unsigned loop_steps(void) {
  const unsigned K = QWEN3_SSM_GRAPHS;
  return 3 * K + 3 * (K + EXTRA) + (SETTLE_ROUNDS + 1) * K; /* the phases of run_loop */
}

/* Every step's output row and every slot's final state, as f32. */
static float *outputs_and_states(cache_env *e, uint64_t *out_n) {
  const uint64_t row = e->cfg.hidden_size, ny = (uint64_t)e->steps * row;
  const uint64_t cf = metrale_state_pool_conv_floats(e->pool), rf = metrale_state_pool_recurrent_floats(e->pool);
  const uint64_t n = ny + N_SLOTS * (cf + rf);
  float *v = malloc(n * sizeof *v);
  cr_assert(v);
  for (uint64_t i = 0; i < ny; i++) v[i] = metrale_bf16_to_f32(e->ys[i]);
  for (uint32_t s = 0; s < N_SLOTS; s++)
    CHECK(metrale_state_pool_read(e->pool, (int32_t)s, v + ny + s * (cf + rf), v + ny + s * (cf + rf) + cf));
  *out_n = n;
  return v;
}

/* (No Criterion .timeout: beside the layer suite's other tests it made Criterion's runner lose 48
 * bytes under LeakSanitizer in CI's ASan pass, as test_slots.c says; ctest's timeout bounds it.) */
Test(graph_cache, keys_going_round_keep_their_recordings) {
  cache_env e;
  memset(&e, 0, sizeof e);
  e.dev = lt_open_device();
  e.be = metrale_device_backend(e.dev);
  lt_small_config(&e.cfg, 1);
  metrale_random_source rs = {31};
  CHECK(metrale_qwen3_ssm_layer_create(e.dev, &e.cfg, 0, metrale_weight_source_random(&rs), &e.layer));
  CHECK(metrale_state_pool_create(e.dev, metrale_state_dims_of(&e.cfg), N_SLOTS, &e.pool));
  const uint64_t row = e.cfg.hidden_size;
  CHECK(metrale_alloc(e.dev, X_ROWS * row * 2, &e.x));
  CHECK(metrale_alloc(e.dev, 2 * row * 2, &e.y));
  float *fx = lt_random_x(X_ROWS * row, 5);
  metrale_bf16 *hx = malloc(X_ROWS * row * sizeof *hx);
  cr_assert(hx);
  for (uint64_t i = 0; i < X_ROWS * row; i++) hx[i] = metrale_f32_to_bf16(fx[i]);
  CHECK(e.be->vt->copy_h2d(e.be, e.x, hx, X_ROWS * row * 2, NULL));
  CHECK(e.be->vt->stream_sync(e.be, NULL));
  free(hx), free(fx);
  e.steps = loop_steps();
  e.ys = calloc((uint64_t)e.steps * row, sizeof *e.ys);
  cr_assert(e.ys);

  gpu_backend_vtable vt;
  wrap_graphs(e.be, &vt);
  metrale_qwen3_ssm_layer_set_graphs(e.layer, 1); /* the layer asks the device when it decides */
  cr_assert(metrale_device_has_graphs(e.dev), "the wrapped vtable has graphs");
  run_loop(&e, 1);
  cr_expect_eq(G.misuses, 0, "%u calls other than launches were made while recording", G.misuses);
  uint64_t n1 = 0, n2 = 0;
  float *replayed = outputs_and_states(&e, &n1);

  metrale_qwen3_ssm_layer_set_graphs(e.layer, 0); /* drops the recordings through the wrapped vtable */
  e.be->vt = inner;
  run_loop(&e, 0);
  float *eager = outputs_and_states(&e, &n2);
  cr_assert_eq(n1, n2);
  const uint64_t ny = (uint64_t)e.steps * row;
  lt_expect_same_bits(replayed, eager, n1, ny, "graphs vs eager");
  /* the comparison says something only if the states moved */
  float *moved = eager + ny;
  int zero = 1;
  for (uint64_t i = 0; i < n2 - ny && zero; i++) zero = moved[i] == 0.0f;
  cr_expect(!zero, "no slot's state moved over %u steps", e.steps);

  free(replayed), free(eager), free(e.ys);
  metrale_free(e.dev, e.x);
  metrale_free(e.dev, e.y);
  metrale_state_pool_destroy(e.pool);
  metrale_qwen3_ssm_layer_destroy(e.layer);
  metrale_device_destroy(e.dev);
}
