/* Decode steps replayed from recorded graphs.
 *
 * Once its slot list is on the device (layer.c, upload_lists) a decode step is launches
 * only: three for the mixer at the a3b shape, about a dozen for the whole MoE layer.  On
 * a backend with graphs the layer records a step the first time it meets its
 * (part, pool, x, y, batch, stream) and from then on replays the recording with one
 * call.  The launches read the slot list, the input and the state from device memory
 * when they run, and their arguments are exactly the eager ones, so a replay computes
 * what the eager launches would.  Recordings die with the scratch buffers they point
 * into (qwen3_ssm_graphs_clear) and with the layer.
 *
 * The cache (layer.h, QWEN3_SSM_GRAPHS): a serving loop's batch size changes from step to
 * step, so one key per batch size it meets.  First in, first out over 8 entries recorded
 * every step once the loop went round more than 8 sizes (metrale bench --cycle: each step
 * then cost an eager step and a recording).  Now an empty entry is taken first; with none,
 * the least recently replayed entry is replaced only after QWEN3_SSM_GRAPH_IDLE steps
 * without a replay, and a new key meanwhile runs its step eagerly, unrecorded.  A loop over
 * more keys than entries so keeps QWEN3_SSM_GRAPHS of them replayed and runs the rest
 * eagerly, and a loop that moved on to other keys gets them recorded within
 * QWEN3_SSM_GRAPH_IDLE steps. */
#include <string.h>

#include "layer.h"

_Static_assert(QWEN3_SSM_GRAPHS == 32 && QWEN3_SSM_GRAPH_IDLE == 64,
               "qwen3_ssm.h tells callers the layer keeps 32 recordings, replaced after 64 steps unused");

static int same_key(const qwen3_ssm_graph *a, const qwen3_ssm_graph *b) {
  return a->part == b->part && a->pool == b->pool && a->conv == b->conv && a->rec == b->rec &&
         a->x == b->x && a->y == b->y && a->batch == b->batch && a->st == b->st;
}

void qwen3_ssm_graphs_clear(metrale_qwen3_ssm_layer *L) {
  gpu_backend *be = metrale_device_backend(L->dev);
  for (unsigned i = 0; i < QWEN3_SSM_GRAPHS; i++) {
    if (L->graphs[i].graph) be->vt->graph_destroy(be, L->graphs[i].graph);
    memset(&L->graphs[i], 0, sizeof L->graphs[i]);
  }
}

int qwen3_ssm_graphs_used(const metrale_qwen3_ssm_layer *L) {
  return !L->graphs_off && metrale_device_has_graphs(L->dev);
}

metrale_status qwen3_ssm_decode_step(metrale_qwen3_ssm_layer *L, metrale_state_pool *pool,
                                     metrale_part part, gpu_ptr x, gpu_ptr y, uint32_t batch,
                                     gpu_stream st) {
  if (!qwen3_ssm_graphs_used(L)) return qwen3_ssm_forward(L, pool, part, x, y, batch, batch, 1, st);
  gpu_backend *be = metrale_device_backend(L->dev);
  qwen3_ssm_graph key = {.part = part, .pool = pool, .conv = metrale_state_pool_conv(pool),
                         .rec = metrale_state_pool_recurrent(pool), .x = x, .y = y,
                         .batch = batch, .st = st};
  const uint64_t now = ++L->graph_steps;
  qwen3_ssm_graph *slot = NULL; /* an empty entry, else the least recently used one */
  for (unsigned i = 0; i < QWEN3_SSM_GRAPHS; i++) {
    qwen3_ssm_graph *g = &L->graphs[i];
    if (g->graph && same_key(g, &key)) {
      g->used = now;
      return be->vt->graph_launch(be, g->graph, st);
    }
    if (!slot || (slot->graph && (!g->graph || g->used < slot->used))) slot = g;
  }
  if (slot->graph && now - slot->used <= QWEN3_SSM_GRAPH_IDLE)
    return qwen3_ssm_forward(L, pool, part, x, y, batch, batch, 1, st); /* every entry in use */

  /* Record.  Nothing runs while recording, so a failure leaves every entry as it was. */
  METRALE_RETURN_IF_ERROR(be->vt->graph_begin(be, st));
  metrale_status s = qwen3_ssm_forward(L, pool, part, x, y, batch, batch, 1, st);
  gpu_graph g = NULL;
  metrale_status e = be->vt->graph_end(be, st, s ? NULL : &g);
  if (s) {
    metrale_status_free(e);
    return s;
  }
  if (e) return metrale_status_annotate(e, "recording a decode step of batch %u", batch);
  if (slot->graph) be->vt->graph_destroy(be, slot->graph);
  *slot = key;
  slot->graph = g;
  slot->used = now;
  return be->vt->graph_launch(be, g, st);
}

void metrale_qwen3_ssm_layer_set_graphs(metrale_qwen3_ssm_layer *L, int on) {
  L->graphs_off = !on;
  if (!on) qwen3_ssm_graphs_clear(L);
}
