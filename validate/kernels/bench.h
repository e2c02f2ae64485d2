// Common harness for the validate/ microbenchmarks: error checks, event timing with warm-up,
// median/min/max over repetitions, L2 flushing, random fills and CSV rows in the format of
// validate/data/public_measurements.csv (id,source,hardware,library,op,dtype,shape_json,metric,
// value,unit,notes). Every program prints its rows to stdout and diagnostics to stderr; a failed
// check exits non-zero so run_gpu.sh records the program as failed.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(call)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,             \
              cudaGetErrorString(e_));                                                  \
      exit(2);                                                                          \
    }                                                                                   \
  } while (0)

// After every launch: a launch error (bad configuration, too many resources) is only visible here.
#define CK_LAUNCH() CK(cudaGetLastError())

// A failed result check: print and exit non-zero (never report a time for a wrong result).
#define FAIL(...)                                                                       \
  do {                                                                                  \
    fprintf(stderr, "CHECK FAILED %s:%d: ", __FILE__, __LINE__);                       \
    fprintf(stderr, __VA_ARGS__);                                                       \
    fprintf(stderr, "\n");                                                              \
    exit(3);                                                                            \
  } while (0)

namespace bench {

inline std::string fmt(const char* f, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

struct Stats {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0, warmup = 0;
  std::string notes() const {
    return fmt("median of %d reps after %d warm-up; min=%.6g ms; max=%.6g ms", reps, warmup,
               min_ms, max_ms);
  }
};

inline Stats summarize(std::vector<float> ms, int warmup) {
  Stats s;
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  s.reps = (int)n;
  s.warmup = warmup;
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  s.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  return s;
}

// Writes (not just reads) a buffer twice the L2 size: the dirty lines of this buffer evict whatever
// the timed kernel left in L2, so each repetition starts from HBM.
__global__ void l2_flush_kernel(int4* buf, size_t n, int salt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    buf[i] = make_int4(salt, (int)i, salt, (int)i);
}

struct L2Flush {
  int4* buf = nullptr;
  size_t n = 0;
  int salt = 0, sms = 0;
  void init() {
    int dev, l2;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    n = 2 * (size_t)l2 / sizeof(int4);
    CK(cudaMalloc(&buf, n * sizeof(int4)));
  }
  void operator()(cudaStream_t s = 0) {
    if (!buf) init();
    l2_flush_kernel<<<sms * 4, 512, 0, s>>>(buf, n, ++salt);
    CK_LAUNCH();
  }
  ~L2Flush() { if (buf) cudaFree(buf); }
};

// Times `run(stream)` with CUDA events: `warmup` untimed runs, then `reps` timed runs, each with its
// own event pair so the spread is visible. With `flush`, L2 is flushed before every run (outside
// the timed region).
template <class F>
Stats time_it(F&& run, int warmup, int reps, L2Flush* flush = nullptr, cudaStream_t s = 0) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) {
    if (flush) (*flush)(s);
    run(s);
  }
  CK(cudaStreamSynchronize(s));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    if (flush) (*flush)(s);
    CK(cudaEventRecord(a, s));
    run(s);
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return summarize(ms, warmup);
}

// ---- deterministic pseudo-random fills (never time or check on zeros) ----
__host__ __device__ inline uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (uint32_t)x;
}
// Uniform in [-1, 1).
__host__ __device__ inline float hash_uniform(uint64_t i, uint32_t seed) {
  return (float)(hash32(i * 0x9E3779B97F4A7C15ULL + seed) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

template <class T>
__global__ void fill_uniform_kernel(T* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = T(hash_uniform(i, seed) * scale);
}

template <class T>
void fill_uniform(T* p, size_t n, uint32_t seed, float scale = 1.0f, cudaStream_t s = 0) {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  fill_uniform_kernel<T><<<sms * 8, 256, 0, s>>>(p, n, seed, scale);
  CK_LAUNCH();
}

// Poison: 0xFF bytes are NaN in fp32/bf16/fp16 and an impossible value for 0/1 masks, so an
// element the kernel failed to write shows up in the check.
inline void poison(void* p, size_t bytes, cudaStream_t s = 0) { CK(cudaMemsetAsync(p, 0xFF, bytes, s)); }

// ---- device / CSV output ----
struct Device {
  cudaDeviceProp prop;
  int sms = 0;
  Device() {
    int dev;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    sms = prop.multiProcessorCount;
  }
};

inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// One CSV row. `program` names the source file; ids are numbered per program and made globally
// unique by validate/collect.py (which prefixes device and run date).
struct Csv {
  std::string program, hardware, library;
  int seq = 0;
  Csv(std::string prog, std::string hw, std::string lib)
      : program(std::move(prog)), hardware(std::move(hw)), library(std::move(lib)) {}
  void row(const std::string& op, const std::string& dtype, const std::string& shape_json,
           const std::string& metric, double value, const std::string& unit,
           const std::string& notes) {
    std::string id = fmt("%s-%s-%03d", program.c_str(), op.c_str(), ++seq);
    std::string src = "perfmodel validate/kernels/" + program + ".cu";
    printf("%s,%s,%s,%s,%s,%s,%s,%s,%.9g,%s,%s\n", csv_field(id).c_str(), csv_field(src).c_str(),
           csv_field(hardware).c_str(), csv_field(library).c_str(), csv_field(op).c_str(),
           csv_field(dtype).c_str(), csv_field(shape_json).c_str(), csv_field(metric).c_str(),
           value, csv_field(unit).c_str(), csv_field(notes).c_str());
    fflush(stdout);
  }
  // A timed row: value is the median time in ms; achieved rates come from the declared work.
  void time_row(const std::string& op, const std::string& dtype, const std::string& shape_json,
                const Stats& st, double flop, double bytes, const std::string& extra = "") {
    double s = st.median_ms * 1e-3;
    std::string n = st.notes();
    if (flop > 0) n += fmt("; flop=%.6g; achieved=%.4g TFLOP/s", flop, flop / s / 1e12);
    if (bytes > 0) n += fmt("; bytes=%.6g; achieved=%.4g GB/s", bytes, bytes / s / 1e9);
    if (!extra.empty()) n += "; " + extra;
    row(op, dtype, shape_json, "time", st.median_ms, "ms", n);
  }
};

inline void header() {
  printf("id,source,hardware,library,op,dtype,shape_json,metric,value,unit,notes\n");
}

}  // namespace bench
