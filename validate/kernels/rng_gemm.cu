// Philox dropout-mask generation overlapped with a GEMM (docs/hardware-notes.md §6.4): a cuBLASLt
// bf16 GEMM on one stream and the Philox4x32-7 byte-mask kernel on a second stream, versus the two
// back to back on one stream. The RNG grid is limited to 8, 16, 32 or 66 CTAs (as a side stream
// given few SMs would be) or a full wave. Rows: mode "sequential" (GEMM then RNG, events around
// both) and "concurrent" (fork/join across two streams, events around both). The GEMM alone and
// RNG alone times are in the notes. L2 flushed before each rep; both outputs checked.
#include "lt.h"
#include "philox.h"
#include <cmath>

constexpr uint32_t SEED0 = 0x2545F491u, SEED1 = 0x9E3779B9u, STREAM = 0x3C6EF372u;
constexpr uint32_t THRESH = 26, THRESH4 = THRESH * 0x01010101u;

__global__ void count_ones(const uint32_t* w, size_t n, unsigned long long* ones,
                           unsigned long long* bad) {
  unsigned long long n1 = 0, nb = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    nb += (w[i] & 0xFEFEFEFEu) != 0;
    n1 += __popc(w[i]);
  }
  atomicAdd(ones, n1);
  atomicAdd(bad, nb);
}

int main() {
  bench::Device dev;
  bench::Csv csv("rng_gemm", dev.prop.name,
                 bench::fmt("cuBLASLt %d + perfmodel Philox4x32-7 kernel",
                            (int)cublasLtGetVersion()));
  bench::header();
  cublasLtHandle_t h;
  CKLT(cublasLtCreate(&h));
  bench::L2Flush flush;
  const int M = 8192, N = 8192, K = 8192;
  const uint64_t elements = 1ull << 28;  // 256 Mi mask bytes
  const uint64_t calls = elements / 16;
  __nv_bfloat16 *W, *X, *Y;
  uint8_t* mask;
  void* ws;
  const size_t ws_bytes = 64ull << 20;
  CK(cudaMalloc(&W, (size_t)N * K * 2));
  CK(cudaMalloc(&X, (size_t)M * K * 2));
  CK(cudaMalloc(&Y, (size_t)M * N * 2));
  CK(cudaMalloc(&mask, elements));
  CK(cudaMalloc(&ws, ws_bytes));
  bench::fill_uniform(W, (size_t)N * K, 11);
  bench::fill_uniform(X, (size_t)M * K, 12);
  bench::poison(Y, (size_t)M * N * 2);
  bench::poison(mask, elements);
  cudaStream_t s2;
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  lt::Gemm g;
  if (!g.setup(h, M, N, K, false, W, X, Y, ws, ws_bytes)) FAIL("no cuBLASLt algorithm for 8192^3");
  auto rng = philox::mask_bytes_kernel<7, true>;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rng, 256, 0));
  const int full = dev.sms * per_sm;
  bench::Stats gemm_alone = bench::time_it([&](cudaStream_t s) { g.run(s); }, 2, 10, &flush);
  for (int ctas : {8, 16, 32, 66, full}) {
    auto launch_rng = [&](cudaStream_t s) {
      rng<<<ctas, 256, 0, s>>>((uint4*)mask, calls, SEED0, SEED1, STREAM, THRESH4);
      CK_LAUNCH();
    };
    bench::Stats rng_alone = bench::time_it(launch_rng, 2, 10, &flush);
    bench::Stats seq = bench::time_it([&](cudaStream_t s) { g.run(s); launch_rng(s); }, 2, 10,
                                      &flush);
    bench::Stats conc = bench::time_it(
        [&](cudaStream_t s) {
          CK(cudaEventRecord(fork, s));
          CK(cudaStreamWaitEvent(s2, fork, 0));
          g.run(s);
          launch_rng(s2);
          CK(cudaEventRecord(join, s2));
          CK(cudaStreamWaitEvent(s, join, 0));
        },
        2, 10, &flush);
    CK(cudaDeviceSynchronize());
    // Checks: mask keep fraction over all elements (and no poison left), GEMM samples.
    unsigned long long* cnt;
    CK(cudaMalloc(&cnt, 2 * sizeof(unsigned long long)));
    CK(cudaMemset(cnt, 0, 2 * sizeof(unsigned long long)));
    count_ones<<<dev.sms * 8, 256>>>((const uint32_t*)mask, elements / 4, cnt, cnt + 1);
    CK_LAUNCH();
    unsigned long long hc[2];
    CK(cudaMemcpy(hc, cnt, sizeof hc, cudaMemcpyDeviceToHost));
    CK(cudaFree(cnt));
    double keep = (double)hc[0] / elements;
    if (hc[1] || fabs(keep - (256.0 - THRESH) / 256.0) > 2e-4)
      FAIL("rng mask: %llu bad words, keep fraction %.6f", hc[1], keep);
    lt::check(W, X, Y, M, N, K, 1.f, 1.f, 99, "bf16 gemm (rng_gemm)");
    std::string extra = bench::fmt(
        "gemm alone %.6g ms; rng alone (%d CTAs) %.6g ms; sum of alone %.6g ms; %s; rng grid %d"
        " x 256 threads (full wave = %d CTAs)",
        gemm_alone.median_ms, ctas, rng_alone.median_ms,
        gemm_alone.median_ms + rng_alone.median_ms, g.algo_note.c_str(), ctas, full);
    for (int mode = 0; mode < 2; ++mode) {
      std::string shape = bench::fmt(
          "{\"M\":%d,\"N\":%d,\"K\":%d,\"rng_elements\":%llu,\"rng_ctas\":%d,"
          "\"generator\":\"philox4x32-7\",\"output\":\"bytes\",\"mode\":\"%s\"}",
          M, N, K, (unsigned long long)elements, ctas, mode ? "concurrent" : "sequential");
      csv.time_row("rng_gemm_concurrent", "bf16", shape, mode ? conc : seq, 2.0 * M * N * K,
                   0.0, extra);
    }
  }
  g.destroy();
  CK(cudaStreamDestroy(s2));
  CK(cudaEventDestroy(fork));
  CK(cudaEventDestroy(join));
  CK(cudaFree(W));
  CK(cudaFree(X));
  CK(cudaFree(Y));
  CK(cudaFree(mask));
  CK(cudaFree(ws));
  CKLT(cublasLtDestroy(h));
  return 0;
}
