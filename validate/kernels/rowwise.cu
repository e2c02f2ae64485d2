// Row-wise and elementwise memory-bound kernels: RMSNorm and LayerNorm forward (bf16 in/out, fp32
// statistics, writes y and the per-row rstd), softmax forward (fp32 and bf16), and a bf16/fp32
// elementwise add. One CTA per row holding the row in registers (four 16-byte vectors per
// thread), warp-shuffle + shared-memory reductions: one read and one write of the matrix.
// Rows x cols sized to >= 128 MiB per tensor (several times L2); L2 flushed before every rep.
// Checks: outputs poisoned, then sampled rows compared with a double-precision host reference.
#include "bench.h"
#include <cuda_bf16.h>
#include <cmath>

constexpr int VPT = 4;  // 16-byte vectors per thread

template <class T> struct Vec { static constexpr int N = 16 / sizeof(T); };

__device__ inline float to_f(float x) { return x; }
__device__ inline float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T> __device__ inline T from_f(float x);
template <> __device__ inline float from_f<float>(float x) { return x; }
template <> __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

template <int THREADS>
__device__ inline float block_sum(float v, float* sh) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // sh is reused by consecutive reductions
  if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
  __syncthreads();
  float t = 0;
  for (int w = 0; w < THREADS / 32; ++w) t += sh[w];
  return t;
}
template <int THREADS>
__device__ inline float block_max(float v, float* sh) {
  for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
  __syncthreads();
  float t = -INFINITY;
  for (int w = 0; w < THREADS / 32; ++w) t = fmaxf(t, sh[w]);
  return t;
}

// Loads this thread's VPT vectors of row `row` (coalesced: vector v of thread t is at
// (v * THREADS + t) * 16 bytes) into fp32 registers.
template <class T, int COLS, int THREADS>
__device__ inline void load_row(const T* p, size_t row, float (&x)[VPT * Vec<T>::N]) {
  const uint4* src = reinterpret_cast<const uint4*>(p + row * COLS);
  uint4 raw[VPT];
#pragma unroll
  for (int v = 0; v < VPT; ++v) raw[v] = src[v * THREADS + threadIdx.x];
#pragma unroll
  for (int v = 0; v < VPT; ++v) {
    const T* e = reinterpret_cast<const T*>(&raw[v]);
#pragma unroll
    for (int j = 0; j < Vec<T>::N; ++j) x[v * Vec<T>::N + j] = to_f(e[j]);
  }
}
template <class T, int COLS, int THREADS>
__device__ inline void store_row(T* p, size_t row, const float (&y)[VPT * Vec<T>::N]) {
  uint4* dst = reinterpret_cast<uint4*>(p + row * COLS);
#pragma unroll
  for (int v = 0; v < VPT; ++v) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < Vec<T>::N; ++j) e[j] = from_f<T>(y[v * Vec<T>::N + j]);
    dst[v * THREADS + threadIdx.x] = raw;
  }
}
template <int COLS, bool LAYERNORM>
__global__ void norm_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b,
                            __nv_bfloat16* y, float* rstd_out) {
  constexpr int THREADS = COLS / 8 / VPT, E = VPT * 8;
  __shared__ float sh[32];
  float v[E];
  load_row<__nv_bfloat16, COLS, THREADS>(x, blockIdx.x, v);
  float mean = 0.f;
  if (LAYERNORM) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < E; ++i) s += v[i];
    mean = block_sum<THREADS>(s, sh) / COLS;
  }
  float sq = 0.f;
#pragma unroll
  for (int i = 0; i < E; ++i) sq += (v[i] - mean) * (v[i] - mean);
  const float rstd = rsqrtf(block_sum<THREADS>(sq, sh) / COLS + 1e-5f);
  // Weight (and bias) in the same 16-byte-vector layout as the row: 4 vector loads, L2-resident.
  float wv[E], bv[E];
  load_row<__nv_bfloat16, COLS, THREADS>(w, 0, wv);
  if (LAYERNORM) load_row<__nv_bfloat16, COLS, THREADS>(b, 0, bv);
#pragma unroll
  for (int i = 0; i < E; ++i) {
    float o = (v[i] - mean) * rstd * wv[i];
    if (LAYERNORM) o += bv[i];
    v[i] = o;
  }
  store_row<__nv_bfloat16, COLS, THREADS>(y, blockIdx.x, v);
  if (threadIdx.x == 0) rstd_out[blockIdx.x] = rstd;
}

template <class T, int COLS>
__global__ void softmax_kernel(const T* x, T* y) {
  constexpr int THREADS = COLS / Vec<T>::N / VPT, E = VPT * Vec<T>::N;
  __shared__ float sh[32];
  float v[E];
  load_row<T, COLS, THREADS>(x, blockIdx.x, v);
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < E; ++i) m = fmaxf(m, v[i]);
  m = block_max<THREADS>(m, sh);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < E; ++i) {
    v[i] = exp2f((v[i] - m) * 1.4426950408889634f);  // one MUFU.EX2 per element
    s += v[i];
  }
  const float inv = 1.f / block_sum<THREADS>(s, sh);
#pragma unroll
  for (int i = 0; i < E; ++i) v[i] *= inv;
  store_row<T, COLS, THREADS>(y, blockIdx.x, v);
}

template <class T>
__global__ void add_kernel(const uint4* a, const uint4* b, uint4* c, size_t nvec) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nvec;
       i += (size_t)gridDim.x * blockDim.x) {
    uint4 x = a[i], y = b[i], z;
    const T* xe = reinterpret_cast<const T*>(&x);
    const T* ye = reinterpret_cast<const T*>(&y);
    T* ze = reinterpret_cast<T*>(&z);
#pragma unroll
    for (int j = 0; j < Vec<T>::N; ++j) ze[j] = from_f<T>(to_f(xe[j]) + to_f(ye[j]));
    c[i] = z;
  }
}

// ---- host side ----
static float h_bf16(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }
template <class T> static double hval(const T& v);
template <> double hval<float>(const float& v) { return v; }
template <> double hval<__nv_bfloat16>(const __nv_bfloat16& v) {
  uint16_t b; memcpy(&b, &v, 2); return h_bf16(b);
}

template <class T>
static std::vector<T> fetch(const T* d, size_t off, size_t n) {
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), d + off, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

static double tol_of(bool bf16) { return bf16 ? 2e-2 : 1e-4; }

template <int COLS, bool LN>
static void run_norm(bench::Csv& csv, int rows, bench::L2Flush& flush) {
  __nv_bfloat16 *x, *w, *b, *y;
  float* rstd;
  const size_t n = (size_t)rows * COLS;
  CK(cudaMalloc(&x, n * 2));
  CK(cudaMalloc(&y, n * 2));
  CK(cudaMalloc(&w, COLS * 2));
  CK(cudaMalloc(&b, COLS * 2));
  CK(cudaMalloc(&rstd, rows * 4));
  bench::fill_uniform(x, n, 21, 2.0f);
  bench::fill_uniform(w, COLS, 22, 1.0f);
  bench::fill_uniform(b, COLS, 23, 0.5f);
  bench::poison(y, n * 2);
  bench::poison(rstd, rows * 4);
  constexpr int THREADS = COLS / 8 / VPT;
  auto launch = [&](cudaStream_t s) {
    norm_kernel<COLS, LN><<<rows, THREADS, 0, s>>>(x, w, b, y, rstd);
    CK_LAUNCH();
  };
  bench::Stats st = bench::time_it(launch, 3, 20, &flush);
  auto hw = fetch(w, 0, COLS), hb = fetch(b, 0, COLS);
  for (int r : {0, rows / 3, rows - 1}) {
    auto hx = fetch(x, (size_t)r * COLS, COLS), hy = fetch(y, (size_t)r * COLS, COLS);
    double mean = 0, sq = 0;
    if (LN) { for (auto& e : hx) mean += hval(e); mean /= COLS; }
    for (auto& e : hx) sq += (hval(e) - mean) * (hval(e) - mean);
    double rs = 1.0 / sqrt(sq / COLS + 1e-5);
    for (int c = 0; c < COLS; ++c) {
      double want = (hval(hx[c]) - mean) * rs * hval(hw[c]) + (LN ? hval(hb[c]) : 0.0);
      double got = hval(hy[c]);
      if (!(fabs(got - want) <= tol_of(true) * (1 + fabs(want))))
        FAIL("%s row %d col %d: %.6g vs %.6g", LN ? "layernorm" : "rmsnorm", r, c, got, want);
    }
  }
  const double bytes = 2.0 * n * 2 + COLS * 2.0 * (LN ? 2 : 1) + rows * 4.0;
  csv.time_row("norm_fwd", "bf16",
               bench::fmt("{\"rows\":%d,\"cols\":%d,\"kind\":\"%s\",\"direction\":\"fwd\"}", rows,
                          COLS, LN ? "layernorm" : "rmsnorm"),
               st, 0.0, bytes,
               bench::fmt("one CTA of %d threads per row; writes y (bf16) and rstd (fp32); "
                          "L2 flushed before each rep", THREADS));
  CK(cudaFree(x)); CK(cudaFree(y)); CK(cudaFree(w)); CK(cudaFree(b)); CK(cudaFree(rstd));
}

template <class T, int COLS>
static void run_softmax(bench::Csv& csv, int rows, bench::L2Flush& flush) {
  T *x, *y;
  const size_t n = (size_t)rows * COLS;
  CK(cudaMalloc(&x, n * sizeof(T)));
  CK(cudaMalloc(&y, n * sizeof(T)));
  bench::fill_uniform(x, n, 31, 8.0f);
  bench::poison(y, n * sizeof(T));
  constexpr int THREADS = COLS / Vec<T>::N / VPT;
  auto launch = [&](cudaStream_t s) {
    softmax_kernel<T, COLS><<<rows, THREADS, 0, s>>>(x, y);
    CK_LAUNCH();
  };
  bench::Stats st = bench::time_it(launch, 3, 20, &flush);
  const bool bf = sizeof(T) == 2;
  for (int r : {0, rows / 2, rows - 1}) {
    auto hx = fetch(x, (size_t)r * COLS, COLS), hy = fetch(y, (size_t)r * COLS, COLS);
    double m = -1e30, s = 0;
    for (auto& e : hx) m = std::max(m, hval(e));
    for (auto& e : hx) s += exp(hval(e) - m);
    for (int c = 0; c < COLS; ++c) {
      double want = exp(hval(hx[c]) - m) / s, got = hval(hy[c]);
      if (!(fabs(got - want) <= (bf ? 1e-2 : 1e-5) * want + 1e-9))
        FAIL("softmax %s row %d col %d: %.6g vs %.6g", bf ? "bf16" : "fp32", r, c, got, want);
    }
  }
  csv.time_row("softmax_fwd", bf ? "bf16" : "fp32",
               bench::fmt("{\"M\":%d,\"N\":%d}", rows, COLS), st, 0.0, 2.0 * n * sizeof(T),
               bench::fmt("one CTA of %d threads per row; exp2f (MUFU.EX2); L2 flushed before "
                          "each rep", THREADS));
  CK(cudaFree(x)); CK(cudaFree(y));
}

template <class T>
static void run_add(bench::Csv& csv, const bench::Device& dev, size_t n, bench::L2Flush& flush) {
  T *a, *b, *c;
  CK(cudaMalloc(&a, n * sizeof(T)));
  CK(cudaMalloc(&b, n * sizeof(T)));
  CK(cudaMalloc(&c, n * sizeof(T)));
  bench::fill_uniform(a, n, 41);
  bench::fill_uniform(b, n, 42);
  bench::poison(c, n * sizeof(T));
  const size_t nvec = n / Vec<T>::N;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, add_kernel<T>, 512, 0));
  const int grid = dev.sms * per_sm;
  auto launch = [&](cudaStream_t s) {
    add_kernel<T><<<grid, 512, 0, s>>>((const uint4*)a, (const uint4*)b, (uint4*)c, nvec);
    CK_LAUNCH();
  };
  bench::Stats st = bench::time_it(launch, 3, 20, &flush);
  for (size_t off : {(size_t)0, n / 2, n - 4096}) {
    auto ha = fetch(a, off, 4096), hb = fetch(b, off, 4096), hc = fetch(c, off, 4096);
    for (int i = 0; i < 4096; ++i) {
      double want = hval(ha[i]) + hval(hb[i]), got = hval(hc[i]);
      if (!(fabs(got - want) <= (sizeof(T) == 2 ? 8e-3 : 1e-6) * (1 + fabs(want))))
        FAIL("add element %zu: %.6g vs %.6g", off + i, got, want);
    }
  }
  const bool bf = sizeof(T) == 2;
  csv.time_row("elementwise", bf ? "bf16" : "fp32",
               bench::fmt("{\"elements\":%zu,\"inputs\":2,\"outputs\":1,\"flop_per_element\":1,"
                          "\"fn\":\"add\"}", n),
               st, (double)n, 3.0 * n * sizeof(T),
               bench::fmt("grid %d x 512 (persistent), 16-byte vectors; L2 flushed before each "
                          "rep", grid));
  CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(c));
}

int main() {
  bench::Device dev;
  bench::Csv csv("rowwise", dev.prop.name, "perfmodel microbenchmark (CUDA C++ row kernels)");
  bench::header();
  bench::L2Flush flush;
  const int rows = 16384;  // tokens; 128-256 MiB per bf16 tensor
  run_norm<4096, false>(csv, rows, flush);
  run_norm<8192, false>(csv, rows, flush);
  run_norm<4096, true>(csv, rows, flush);
  run_norm<8192, true>(csv, rows, flush);
  run_softmax<float, 4096>(csv, rows, flush);
  run_softmax<float, 8192>(csv, rows, flush);
  run_softmax<__nv_bfloat16, 4096>(csv, rows, flush);
  run_softmax<__nv_bfloat16, 8192>(csv, rows, flush);
  run_add<__nv_bfloat16>(csv, dev, 1ull << 28, flush);
  run_add<float>(csv, dev, 1ull << 28, flush);
  return 0;
}
