// Does updating 537 MB in place stream slower than copying it out of place?  (decode 256's
// state: 256 x 32 heads x 64 KiB, read and written once per step, in place)
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
// grid-stride stream, 16-byte accesses, U loads in flight a thread
template <int U> __global__ void stream(const float4 *__restrict__ src, float4 *__restrict__ dst, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x * U + threadIdx.x, step = (size_t)gridDim.x * blockDim.x * U;
  for (; i + (U - 1) * blockDim.x < n; i += step) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = src[i + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < U; u++) { v[u].x *= 1.0001f; dst[i + u * blockDim.x] = v[u]; }
  }
}
// decode-like: a block owns one 64 KiB head (256 threads x 16 float4), loads it all, then
// writes it all (the read -> reduce -> write pattern of the fused kernel, without the math)
__global__ void heads(const float4 *__restrict__ src, float4 *__restrict__ dst, size_t nheads) {
  for (size_t h = blockIdx.x; h < nheads; h += gridDim.x) {
    const float4 *s = src + h * 4096; float4 *d = dst + h * 4096;
    float4 v[16];
#pragma unroll
    for (int u = 0; u < 16; u++) v[u] = s[threadIdx.x + u * 256];
    __syncthreads();
#pragma unroll
    for (int u = 0; u < 16; u++) { v[u].x *= 1.0001f; d[threadIdx.x + u * 256] = v[u]; }
  }
}
int main() {
  const size_t bytes = 256ull * 32 * 65536, n = bytes / 16;
  float4 *a, *b; CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 0, bytes)); CK(cudaMemset(b, 0, bytes));
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto timeit = [&](const char *name, auto fn) {
    std::vector<float> t;
    for (int r = 0; r < 23; r++) {
      cudaEventRecord(e0); fn(); cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); if (r >= 3) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    float med = t[t.size() / 2];
    printf("%-44s %8.1f us  %6.0f GB/s (read+write)\n", name, med * 1e3, 2.0 * bytes / (med * 1e-3) / 1e9);
  };
  for (int occ : {2, 4, 8}) {
    char nm[96];
    snprintf(nm, sizeof nm, "stream U=8 copy a->b, %d blocks/SM", occ);
    timeit(nm, [&] { stream<8><<<sms * occ, 256>>>(a, b, n); });
    snprintf(nm, sizeof nm, "stream U=8 in place a->a, %d blocks/SM", occ);
    timeit(nm, [&] { stream<8><<<sms * occ, 256>>>(a, a, n); });
  }
  timeit("cudaMemcpy a->b", [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice); });
  for (int occ : {2, 3, 4}) {
    char nm[96];
    snprintf(nm, sizeof nm, "heads copy a->b, %d blocks/SM", occ);
    timeit(nm, [&] { heads<<<sms * occ, 256>>>(a, b, 8192); });
    snprintf(nm, sizeof nm, "heads in place a->a, %d blocks/SM", occ);
    timeit(nm, [&] { heads<<<sms * occ, 256>>>(a, a, 8192); });
  }
  timeit("heads in place, one block a head (8192)", [&] { heads<<<8192, 256>>>(a, a, 8192); });
  timeit("heads copy, one block a head (8192)", [&] { heads<<<8192, 256>>>(a, b, 8192); });
  CK(cudaDeviceSynchronize());
  return 0;
}
