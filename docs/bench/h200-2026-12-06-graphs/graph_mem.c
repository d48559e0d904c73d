/* What one recorded decode step costs to keep: device memory (cuMemGetInfo) and host memory
 * (VmRSS) per instantiated graph of `nodes` kernel launches, and the host time of capture plus
 * instantiation, over `count` graphs.  The launches are of a one-line kernel with eight pointer
 * arguments (the layer's launches take 8-20), so this bounds the layer's cache by its node
 * count, not by its kernels.
 *   gcc -O2 -I/usr/local/cuda/include graph_mem.c -o graph_mem -L/usr/local/cuda/lib64/stubs -lcuda
 *   ./graph_mem NODES COUNT */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char ptx[] =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry k(.param .u64 a0, .param .u64 a1, .param .u64 a2, .param .u64 a3,\n"
    " .param .u64 a4, .param .u64 a5, .param .u64 a6, .param .u64 a7) { ret; }\n";

#define CK(x)                                                           \
  do {                                                                  \
    CUresult r_ = (x);                                                  \
    if (r_ != CUDA_SUCCESS) {                                           \
      const char *m_ = NULL;                                            \
      cuGetErrorString(r_, &m_);                                        \
      fprintf(stderr, "%s: %s\n", #x, m_ ? m_ : "?");                  \
      return 1;                                                         \
    }                                                                   \
  } while (0)

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) v = atol(line + 6);
  if (f) fclose(f);
  return v;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const int nodes = argc > 1 ? atoi(argv[1]) : 3, count = argc > 2 ? atoi(argv[2]) : 1000;
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CUstream st;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuModuleLoadData(&mod, ptx));
  CK(cuModuleGetFunction(&fn, mod, "k"));
  CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CUdeviceptr buf;
  CK(cuMemAlloc(&buf, 1 << 20));
  CUgraphExec *ex = calloc(count, sizeof *ex);
  size_t free0, free1, total;
  CK(cuCtxSynchronize());
  CK(cuMemGetInfo(&free0, &total));
  const long rss0 = rss_kib();
  const double t0 = now_s();
  for (int g = 0; g < count; g++) {
    CK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (int n = 0; n < nodes; n++) {
      CUdeviceptr p[8];
      void *args[8];
      for (int i = 0; i < 8; i++) p[i] = buf + 64 * (unsigned)(g + n + i), args[i] = &p[i];
      CK(cuLaunchKernel(fn, 132, 1, 1, 256, 1, 1, 0, st, args, NULL));
    }
    CUgraph gr;
    CK(cuStreamEndCapture(st, &gr));
    CK(cuGraphInstantiate(&ex[g], gr, 0));
    CK(cuGraphDestroy(gr));
  }
  const double t1 = now_s();
  for (int g = 0; g < count; g++) CK(cuGraphLaunch(ex[g], st)); /* each once, as the layer does */
  CK(cuStreamSynchronize(st));
  CK(cuMemGetInfo(&free1, &total));
  const long rss1 = rss_kib();
  printf("nodes %d graphs %d: device %.1f KiB a graph, host RSS %.1f KiB a graph, capture+instantiate %.1f us a "
         "graph\n",
         nodes, count, ((double)free0 - (double)free1) / 1024.0 / count, (double)(rss1 - rss0) / count,
         (t1 - t0) * 1e6 / count);
  for (int g = 0; g < count; g++) CK(cuGraphExecDestroy(ex[g]));
  free(ex);
  return 0;
}
