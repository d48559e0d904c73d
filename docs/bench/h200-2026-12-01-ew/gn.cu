// gated_rmsnorm_rows at the mixer prefill's shape: rows = T * 32, n = 128; GN_R rows a warp
#include "norm.cu"
#include "common_h.h"
int main() {
  const unsigned n = 128;
  for (unsigned T : {4096u, 16384u}) {
    const unsigned rows = T * 32;
    std::vector<uint16_t> ho((size_t)rows * n), hw(n); std::vector<float> hz((size_t)rows * n);
    for (auto &v : ho) v = tobf(frand()); for (auto &v : hz) v = frand() * 3; for (auto &v : hw) v = tobf(1 + 0.3f * frand());
    bf16 *o[2] = {(bf16 *)up(ho), (bf16 *)up(ho)}, *w = (bf16 *)up(hw); float *z[2] = {up(hz), up(hz)};
    bf16 *y; CK(cudaMalloc(&y, (size_t)rows * n * 2));
    const unsigned grid = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    gated_rmsnorm_rows<<<grid, 256>>>(y, o[0], z[0], w, rows, n, 1e-6f); CK(cudaDeviceSynchronize());
    const uint64_t hy = hash_dev(y, (size_t)rows * n * 2);
    // odd rows count too (partial block)
    CK(cudaMemset(y, 0, (size_t)rows * n * 2));
    gated_rmsnorm_rows<<<(rows - 5 + kRowsPerBlock - 1) / kRowsPerBlock, 256>>>(y, o[0], z[0], w, rows - 5, n, 1e-6f); CK(cudaDeviceSynchronize());
    const uint64_t hy2 = hash_dev(y, (size_t)rows * n * 2);
    float t = timeit([&](int i) { gated_rmsnorm_rows<<<grid, 256>>>(y, o[i & 1], z[i & 1], w, rows, n, 1e-6f); });
    const double bytes = (double)rows * n * (2 + 4 + 2);
    printf("GN_R=%d T=%u rows/block %u: %.2f us (%.0f GB/s)  hash %016llx %016llx\n", GN_R, T, kRowsPerBlock, t, bytes / t / 1e3,
           (unsigned long long)hy, (unsigned long long)hy2);
    cudaFree(o[0]); cudaFree(o[1]); cudaFree(z[0]); cudaFree(z[1]); cudaFree(y); cudaFree(w);
  }
}
