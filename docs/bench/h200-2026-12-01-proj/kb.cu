// harness: gdn_decode_proj_cluster35 variants alone (weights rotated over 3 copies)
#include "gdn_decode.cu"
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cstring>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
__global__ void stream_read(const uint4 *w, size_t n16, uint4 *sink) {
  uint4 acc = make_uint4(0,0,0,0);
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; u++) v[u] = i + u * stride < n16 ? w[i + u * stride] : make_uint4(0,0,0,0);
#pragma unroll
    for (int u = 0; u < 8; u++) { acc.x ^= v[u].x; acc.y ^= v[u].y; acc.z ^= v[u].z; acc.w ^= v[u].w; }
  }
  if (acc.x == 0x12345678u) sink[0] = acc;
}
static uint32_t rng = 12345;
static float frand() { rng = rng * 1664525u + 1013904223u; return ((rng >> 8) & 0xffffff) / 16777216.0f * 2 - 1; }
static uint16_t tobf(float f) { uint32_t u; memcpy(&u, &f, 4); return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
int main() {
  const unsigned nk = 16, nv = 32, dk = 128, dv = 128, kw = 4, H = 2048;
  const size_t C = 2 * nk * dk + nv * dv, P = C + nv * dv + 2 * nv;
  const int NW = 3;
  std::vector<uint16_t> hw(P * H); for (auto &v : hw) v = tobf(frand() * 0.05f);
  std::vector<float> hx(H); for (auto &v : hx) v = frand();
  bf16 *w[NW]; for (int i = 0; i < NW; i++) { CK(cudaMalloc(&w[i], P * H * 2)); CK(cudaMemcpy(w[i], hw.data(), P * H * 2, cudaMemcpyHostToDevice)); }
  float *x, *p, *cs, *alog, *st; bf16 *y, *cw, *dtb, *nw; int *slots;
  CK(cudaMalloc(&x, H * 4)); CK(cudaMemcpy(x, hx.data(), H * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&p, P * 4)); CK(cudaMalloc(&y, nv * dv * 2));
  std::vector<uint16_t> hcw(C * kw); for (auto &v : hcw) v = tobf(frand() * 0.5f);
  CK(cudaMalloc(&cw, C * kw * 2)); CK(cudaMemcpy(cw, hcw.data(), C * kw * 2, cudaMemcpyHostToDevice));
  std::vector<float> hcs(C * 3); for (auto &v : hcs) v = frand();
  CK(cudaMalloc(&cs, C * 3 * 4)); CK(cudaMemcpy(cs, hcs.data(), C * 3 * 4, cudaMemcpyHostToDevice));
  std::vector<float> hal(nv); for (auto &v : hal) v = frand();
  CK(cudaMalloc(&alog, nv * 4)); CK(cudaMemcpy(alog, hal.data(), nv * 4, cudaMemcpyHostToDevice));
  std::vector<uint16_t> hdt(nv); for (auto &v : hdt) v = tobf(frand());
  CK(cudaMalloc(&dtb, nv * 2)); CK(cudaMemcpy(dtb, hdt.data(), nv * 2, cudaMemcpyHostToDevice));
  std::vector<uint16_t> hnw(dv); for (auto &v : hnw) v = tobf(1 + 0.5f * frand());
  CK(cudaMalloc(&nw, dv * 2)); CK(cudaMemcpy(nw, hnw.data(), dv * 2, cudaMemcpyHostToDevice));
  const size_t ns = (size_t)nv * dk * dv;
  std::vector<float> hst(ns); for (auto &v : hst) v = frand() * 0.5f;
  CK(cudaMalloc(&st, ns * 4)); CK(cudaMemcpy(st, hst.data(), ns * 4, cudaMemcpyHostToDevice));
  int hs = 0; CK(cudaMalloc(&slots, 4)); CK(cudaMemcpy(slots, &hs, 4, cudaMemcpyHostToDevice));
  uint4 *sink; CK(cudaMalloc(&sink, 16));

  cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(128); cfg.blockDim = dim3(256);
  int ncl = -1; cudaError_t oe = cudaOccupancyMaxActiveClusters(&ncl, (void *)gdn_decode_proj_cluster35, &cfg);
  int ncl35 = -1; cudaOccupancyMaxActiveClusters(&ncl35, (void *)gdn_decode_cluster35, &cfg);
  printf("max active clusters: proj %d (%s), cluster35 %d\n", ncl, cudaGetErrorString(oe), ncl35);
  // correctness digest (one step from fresh state)
  gdn_decode_proj_cluster35<<<128, 256>>>(y, p, x, w[0], cw, cs, alog, dtb, nw, st, slots, 1, nk, nv, dk, dv, kw, H, 1e-6f);
  CK(cudaDeviceSynchronize());
  std::vector<uint32_t> hp(P), hy(nv * dv / 2);
  CK(cudaMemcpy(hp.data(), p, P * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hy.data(), y, nv * dv * 2, cudaMemcpyDeviceToHost));
  uint64_t dp = 1469598103934665603ull, dy = dp; for (auto v : hp) dp = (dp ^ v) * 1099511628211ull; for (auto v : hy) dy = (dy ^ v) * 1099511628211ull;
  printf("digest p %016llx y %016llx\n", (unsigned long long)dp, (unsigned long long)dy);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto timeit = [&](auto launch) { std::vector<float> t; for (int r = 0; r < 9; r++) { cudaEventRecord(a); for (int i = 0; i < 60; i++) launch(i); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000 / 60); } std::sort(t.begin(), t.end()); return t[4]; };
  float tp = timeit([&](int i) { gdn_decode_proj_cluster35<<<128, 256>>>(y, p, x, w[i % NW], cw, cs, alog, dtb, nw, st, slots, 1, nk, nv, dk, dv, kw, H, 1e-6f); });
  float tc = timeit([&](int i) { gdn_decode_cluster35<<<128, 256>>>(y, p, cw, cs, alog, dtb, nw, st, slots, 1, nk, nv, dk, dv, kw, 1e-6f); });
  float t528 = timeit([&](int i) { stream_read<<<528, 256>>>((const uint4 *)w[i % NW], P * H * 2 / 16, sink); });
  float t128 = timeit([&](int i) { stream_read<<<128, 256>>>((const uint4 *)w[i % NW], P * H * 2 / 16, sink); });
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
  at[0].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
  cudaLaunchConfig_t lc = {}; lc.gridDim = dim3(128); lc.blockDim = dim3(256); lc.attrs = at; lc.numAttrs = 1;
  float tsp = timeit([&](int i) { cudaLaunchKernelEx(&lc, gdn_decode_proj_cluster35, y, p, x, (const bf16 *)w[i % NW], (const bf16 *)cw, cs, (const float *)alog, (const bf16 *)dtb, (const bf16 *)nw, st, (const int *)slots, 1u, nk, nv, dk, dv, kw, H, 1e-6f); });
  int nsp = -1; cudaOccupancyMaxActiveClusters(&nsp, (void *)gdn_decode_proj_cluster35, &lc);
  printf("spread: %.2f us (%.0f GB/s), max active clusters %d\n", tsp, P * H * 2 / tsp / 1e3, nsp);
  CK(cudaGetLastError());
  printf("proj kernel %.2f us (%.0f GB/s of weights); cluster35 alone %.2f us; stream 528x256 %.2f us (%.0f GB/s), 128x256 %.2f us\n",
         tp, P * H * 2 / tp / 1e3, tc, t528, P * H * 2 / t528 / 1e3, t128);
  return 0;
}
