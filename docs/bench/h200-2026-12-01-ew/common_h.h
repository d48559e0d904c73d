#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
static uint32_t rng_ = 12345;
static float frand() { rng_ = rng_ * 1664525u + 1013904223u; return ((rng_ >> 8) & 0xffffff) / 16777216.0f * 2 - 1; }
static uint16_t tobf(float f) { uint32_t u; memcpy(&u, &f, 4); return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
template <class T> T *up(const std::vector<T> &v) { T *d; CK(cudaMalloc(&d, v.size() * sizeof(T))); CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice)); return d; }
static uint64_t hash_dev(const void *p, size_t bytes) {
  std::vector<uint8_t> h(bytes); CK(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  uint64_t x = 1469598103934665603ull; for (uint8_t b : h) { x ^= b; x *= 1099511628211ull; } return x;
}
template <class F> static float timeit(F launch, int reps = 9, int inner = 20) {
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1); std::vector<float> t;
  for (int i = 0; i < 3; i++) launch(i);
  for (int r = 0; r < reps; r++) { cudaEventRecord(e0); for (int i = 0; i < inner; i++) launch(i); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms * 1000 / inner); }
  std::sort(t.begin(), t.end()); CK(cudaGetLastError()); return t[reps / 2];
}
