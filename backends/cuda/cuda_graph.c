/* Graphs: a stream's launches recorded once (stream capture) and replayed with one
 * cuGraphLaunch, which saves the per-launch host and queue cost of a decode step. */
#include <stdlib.h>

#include "cuda_backend.h"

/* What a gpu_graph points to. */
typedef struct cuda_graph_rec {
  cuda_graph_exec exec;
} cuda_graph_rec;

metrale_status cuda_graph_begin(gpu_backend *base, gpu_stream stream) {
  cuda_backend *be = cuda_of(base);
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  /* thread-local: other threads' unrelated driver calls neither spoil nor are refused by
   * this recording */
  CUDA_CHECK(be->drv,
             be->drv->StreamBeginCapture(cuda_stream_of(be, stream), CUDA_DRV_STREAM_CAPTURE_MODE_THREAD_LOCAL),
             "cuStreamBeginCapture");
  return METRALE_OK;
}

metrale_status cuda_graph_end(gpu_backend *base, gpu_stream stream, gpu_graph *out_graph) {
  cuda_backend *be = cuda_of(base);
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  cuda_graph g = NULL;
  cuda_result r = be->drv->StreamEndCapture(cuda_stream_of(be, stream), &g);
  if (r != CUDA_DRV_SUCCESS || !out_graph) {
    if (g) be->drv->GraphDestroy(g);
    return r == CUDA_DRV_SUCCESS ? METRALE_OK
                                 : cuda_error(be->drv, r, __FILE__, __LINE__, "cuStreamEndCapture");
  }
  cuda_graph_rec *rec = malloc(sizeof *rec);
  if (!rec) {
    be->drv->GraphDestroy(g);
    return METRALE_ERROR(OUT_OF_MEMORY, "cuda graph record");
  }
  r = be->drv->GraphInstantiate(&rec->exec, g, 0);
  be->drv->GraphDestroy(g); /* the executable graph keeps what it needs */
  if (r != CUDA_DRV_SUCCESS) {
    free(rec);
    return cuda_error(be->drv, r, __FILE__, __LINE__, "cuGraphInstantiateWithFlags");
  }
  *out_graph = (gpu_graph)(void *)rec;
  return METRALE_OK;
}

metrale_status cuda_graph_launch(gpu_backend *base, gpu_graph graph, gpu_stream stream) {
  cuda_backend *be = cuda_of(base);
  if (!graph) return METRALE_ERROR(INVALID_ARGUMENT, "cuda graph launch with a null graph");
  METRALE_RETURN_IF_ERROR(cuda_bind(be));
  const cuda_graph_rec *rec = (const cuda_graph_rec *)(void *)graph;
  CUDA_CHECK(be->drv, be->drv->GraphLaunch(rec->exec, cuda_stream_of(be, stream)), "cuGraphLaunch");
  return METRALE_OK;
}

void cuda_graph_destroy(gpu_backend *base, gpu_graph graph) {
  if (!graph) return;
  cuda_backend *be = cuda_of(base);
  cuda_graph_rec *rec = (cuda_graph_rec *)(void *)graph;
  metrale_status s = cuda_bind(be);
  if (!s) be->drv->GraphExecDestroy(rec->exec);
  metrale_status_free(s); /* no context: it went, and the graph with it */
  free(rec);
}
