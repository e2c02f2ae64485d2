// cuBLASLt helper shared by gemm_cublaslt.cu and rng_gemm.cu: Y[M,N] = X[M,K] W[N,K]^T
// (nn.Linear) in the layout cuBLASLt wants for FP8 ("TN"): column-major C^T[N,M] = W^T(op T) X.
// bf16 or fp8 e4m3 inputs (with device scale pointers), bf16 output, fp32 accumulation.
// Algorithm: the heuristic's top candidates are each timed briefly and the fastest is kept.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include "bench.h"

#define CKLT(call)                                                                      \
  do {                                                                                  \
    cublasStatus_t s_ = (call);                                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                  \
      fprintf(stderr, "%s:%d: %s failed: status %d\n", __FILE__, __LINE__, #call,      \
              (int)s_);                                                                 \
      exit(2);                                                                          \
    }                                                                                   \
  } while (0)

namespace lt {

struct Gemm {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;
  int m = 0, n = 0, k = 0;  // row-major problem: M tokens, N outputs, K inputs
  bool fp8 = false;
  const void *W = nullptr, *X = nullptr;
  void* Y = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  const float *scale_a = nullptr, *scale_b = nullptr;
  float alpha = 1.f, beta = 0.f;
  int candidates = 0;
  std::string algo_note;

  // Returns false (with a reason on stderr) when cuBLASLt offers no algorithm for the shape.
  bool setup(cublasLtHandle_t handle, int M, int N, int K, bool use_fp8, const void* w,
             const void* x, void* y, void* workspace, size_t workspace_bytes,
             const float* sa = nullptr, const float* sb = nullptr) {
    h = handle; m = M; n = N; k = K; fp8 = use_fp8; W = w; X = x; Y = y;
    ws = workspace; ws_bytes = workspace_bytes; scale_a = sa; scale_b = sb;
    cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    CKLT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CKLT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CKLT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (fp8) {
      CKLT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a,
                                          sizeof scale_a));
      CKLT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b,
                                          sizeof scale_b));
    }
    // A = W stored [N][K] row-major = K x N column-major, used transposed -> N x K.
    CKLT(cublasLtMatrixLayoutCreate(&la, in, K, N, K));
    // B = X stored [M][K] row-major = K x M column-major.
    CKLT(cublasLtMatrixLayoutCreate(&lb, in, K, M, K));
    // C = D = Y stored [M][N] row-major = N x M column-major.
    CKLT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    CKLT(cublasLtMatmulPreferenceCreate(&pref));
    CKLT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t res[8];
    int got = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 8, res, &got);
    CKLT(cublasLtMatmulPreferenceDestroy(pref));
    if (st != CUBLAS_STATUS_SUCCESS || got == 0) {
      fprintf(stderr, "cuBLASLt: no algorithm for M=%d N=%d K=%d %s (status %d)\n", M, N, K,
              fp8 ? "fp8" : "bf16", (int)st);
      return false;
    }
    // Time up to 4 candidates: 1 warm-up + 3 runs each, keep the lowest median.
    candidates = std::min(got, 4);
    double best = 1e30;
    int best_i = 0;
    for (int i = 0; i < candidates; ++i) {
      algo = res[i].algo;
      bench::Stats s = bench::time_it([&](cudaStream_t strm) { run(strm); }, 1, 3);
      if (s.median_ms < best) { best = s.median_ms; best_i = i; }
    }
    algo = res[best_i].algo;
    algo_note = bench::fmt("cuBLASLt heuristic candidate %d of %d (fastest of %d timed)", best_i,
                           got, candidates);
    return true;
  }

  void run(cudaStream_t s) {
    CKLT(cublasLtMatmul(h, op, &alpha, W, la, X, lb, &beta, Y, lc, Y, lc, &algo, ws, ws_bytes,
                        s));
  }

  void destroy() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (op) cublasLtMatmulDescDestroy(op);
    la = lb = lc = nullptr;
    op = nullptr;
  }
};

// Reference for sampled outputs: Y[i][j] = sa*sb*sum_k X[i][k] W[j][k] in double, and
// sum_k |X W| for the tolerance. One warp per sample (lanes stride over K, then a shuffle sum).
template <class T>
__global__ void ref_kernel(const T* W, const T* X, const __nv_bfloat16* Y, int N, int K,
                           const int* si, const int* sj, int ns, float sa, float sb, double* ref,
                           double* mag, double* got) {
  int t = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (t >= ns) return;
  const T* x = X + (size_t)si[t] * K;
  const T* w = W + (size_t)sj[t] * K;
  double acc = 0, m = 0;
  for (int q = lane; q < K; q += 32) {
    double p = (double)(float)x[q] * (double)(float)w[q];
    acc += p;
    m += fabs(p);
  }
  for (int o = 16; o; o >>= 1) {
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
    m += __shfl_xor_sync(0xffffffffu, m, o);
  }
  if (lane == 0) {
    ref[t] = acc * sa * sb;
    mag[t] = m * fabs(sa * sb);
    got[t] = (double)__bfloat162float(Y[(size_t)si[t] * N + sj[t]]);
  }
}

// Checks `samples` outputs of Y (bf16) against the double reference; exits on a mismatch.
// Tolerance: bf16 output rounding (2^-8 relative) plus fp32-accumulation slack on sum |x w|.
template <class T>
void check(const T* W, const T* X, const __nv_bfloat16* Y, int M, int N, int K, float sa, float sb,
           uint32_t seed, const char* what) {
  const int ns = 256;
  std::vector<int> hi(ns), hj(ns);
  for (int t = 0; t < ns; ++t) {
    hi[t] = (int)(bench::hash32(seed * 977u + 2 * t) % (uint32_t)M);
    hj[t] = (int)(bench::hash32(seed * 977u + 2 * t + 1) % (uint32_t)N);
  }
  hi[0] = 0; hj[0] = 0; hi[1] = M - 1; hj[1] = N - 1;
  int *di, *dj;
  double *dref, *dmag, *dgot;
  CK(cudaMalloc(&di, ns * sizeof(int)));
  CK(cudaMalloc(&dj, ns * sizeof(int)));
  CK(cudaMalloc(&dref, ns * sizeof(double)));
  CK(cudaMalloc(&dmag, ns * sizeof(double)));
  CK(cudaMalloc(&dgot, ns * sizeof(double)));
  CK(cudaMemcpy(di, hi.data(), ns * sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dj, hj.data(), ns * sizeof(int), cudaMemcpyHostToDevice));
  ref_kernel<T><<<(ns * 32 + 255) / 256, 256>>>(W, X, Y, N, K, di, dj, ns, sa, sb, dref, dmag, dgot);
  CK_LAUNCH();
  std::vector<double> ref(ns), mag(ns), got(ns);
  CK(cudaMemcpy(ref.data(), dref, ns * sizeof(double), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(mag.data(), dmag, ns * sizeof(double), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(got.data(), dgot, ns * sizeof(double), cudaMemcpyDeviceToHost));
  for (int t = 0; t < ns; ++t) {
    double y = got[t];  // NaN (poison never overwritten) fails the comparison below
    double tol = 8e-3 * fabs(ref[t]) + 1e-4 * mag[t] + 1e-6;
    if (!(fabs(y - ref[t]) <= tol))
      FAIL("%s M=%d N=%d K=%d: Y[%d][%d] = %.6g, reference %.6g (tol %.3g)", what, M, N, K,
           hi[t], hj[t], y, ref[t], tol);
  }
  CK(cudaFree(di));
  CK(cudaFree(dj));
  CK(cudaFree(dref));
  CK(cudaFree(dmag));
  CK(cudaFree(dgot));
}

}  // namespace lt
