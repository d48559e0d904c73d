// conv1d_prefill_l2norm at the mixer prefill's shape: C = 8192, nk = 16, dk = 128, kw = 4, one sequence
#include "conv.cu"
#include "common_h.h"
int main() {
  const unsigned C = 8192, nk = 16, dk = 128, kw = 4;
  for (unsigned T : {4096u, 16384u}) {
    std::vector<float> hx((size_t)T * C), hst((size_t)C * 3); std::vector<uint16_t> hw(C * kw);
    for (auto &v : hx) v = frand(); for (auto &v : hst) v = frand(); for (auto &v : hw) v = tobf(frand() * 0.6f);
    float *x[2] = {up(hx), up(hx)}, *st = up(hst); bf16 *w = (bf16 *)up(hw);
    std::vector<int> hcu = {0, (int)T}, hsl = {0};
    int *cu = up(hcu), *sl = up(hsl);
    // two sequences, the second starting mid-tile, for the bit check
    std::vector<int> hcu2 = {0, 1000, (int)T}, hsl2 = {0, 1};
    std::vector<float> hst2((size_t)2 * C * 3); for (auto &v : hst2) v = frand();
    int *cu2 = up(hcu2), *sl2 = up(hsl2); float *st2 = up(hst2);
    float *y; CK(cudaMalloc(&y, (size_t)T * C * 4));
    dim3 grid(C / 1024, (T + 63) / 64);
    conv1d_prefill_l2norm<<<grid, 256>>>(y, x[0], w, st, cu, sl, 1, C, kw, nk, dk); CK(cudaDeviceSynchronize());
    const uint64_t hy = hash_dev(y, (size_t)T * C * 4), hs = hash_dev(st, hst.size() * 4);
    conv1d_prefill_l2norm<<<grid, 256>>>(y, x[0], w, st2, cu2, sl2, 2, C, kw, nk, dk); CK(cudaDeviceSynchronize());
    const uint64_t hy2 = hash_dev(y, (size_t)T * C * 4), hs2 = hash_dev(st2, hst2.size() * 4);
    float t = timeit([&](int i) { conv1d_prefill_l2norm<<<grid, 256>>>(y, x[i & 1], w, st, cu, sl, 1, C, kw, nk, dk); });
    const double bytes = 2.0 * T * C * 4;
    printf("PIPE=%d SKIPV=%d T=%u: %.2f us (%.0f GB/s)  hash %016llx %016llx %016llx %016llx\n", CONV_PIPE, CONV_SKIPV, T, t, bytes / t / 1e3,
           (unsigned long long)hy, (unsigned long long)hs, (unsigned long long)hy2, (unsigned long long)hs2);
    cudaFree(x[0]); cudaFree(x[1]); cudaFree(st); cudaFree(st2); cudaFree(y);
  }
}
