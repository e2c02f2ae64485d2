// HBM and L2 streaming bandwidth: read, write, copy and triad (a = b + s*c) over fp32 arrays.
// HBM variant: 4 GiB per array (~70x the L2), L2 flushed before every repetition. L2 variant:
// arrays totalling about 1/4 of L2 (one array of L2/4 for read/write, split for copy/triad),
// re-streamed many passes in one launch; each pass gives each thread other vectors so the
// compiler cannot hoist loads or drop stores across passes.
// Bytes are counted as the model does: every input element read once and every output element
// written once per pass (read+write for copy/triad). Access: 16-byte vectors, coalesced, four
// independent vectors in flight per thread, persistent grid of one full wave.
// Checks: read sums small integers (exact in fp32) and compares with the closed form; write/copy/
// triad outputs are poisoned before timing and compared element by element on the device.
#include "bench.h"

enum Kind { READ, WRITE, COPY, TRIAD };
static const char* kOp[] = {"load_stream", "store_stream", "copy", "triad"};
constexpr int THREADS = 512;
constexpr int UNROLL = 4;

// Input pattern: small integers so per-thread fp32 sums are exact.
__host__ __device__ inline float pat(size_t i, int which) { return (float)((i + which) & 7); }

__global__ void init_kernel(float4* p, size_t nvec, int which) {
  for (size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x; v < nvec;
       v += (size_t)gridDim.x * blockDim.x) {
    size_t i = 4 * v;
    p[v] = make_float4(pat(i, which), pat(i + 1, which), pat(i + 2, which), pat(i + 3, which));
  }
}

// One kernel for all four kinds; `passes` > 1 only for the L2-resident variant. In pass p a thread
// takes the vectors of thread (tid + 7 * p * blockDim) mod (grid threads), so each pass reads other
// addresses than the last (no load can be hoisted out of the pass loop) while the inner loop
// stays a plain strided walk.
template <int kind>
__global__ void __launch_bounds__(THREADS) stream_kernel(float4* __restrict__ a,
                                                         const float4* __restrict__ b,
                                                         const float4* __restrict__ c,
                                                         size_t nvec, int passes, float s,
                                                         float* __restrict__ partial) {
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  float acc = 0.f;
  // Written pattern: vector v holds pat(4v..4v+3, 3), which depends only on v's parity; two
  // constants avoid per-element int->float conversions (I2F.U64 is an XU op, 16/clk/SM, and
  // would cap the store rate far below HBM bandwidth).
  const float4 w0 = make_float4(pat(0, 3), pat(1, 3), pat(2, 3), pat(3, 3));
  const float4 w1 = make_float4(pat(4, 3), pat(5, 3), pat(6, 3), pat(7, 3));
  for (int p = 0; p < passes; ++p) {
    const size_t first = (tid + (size_t)p * 7 * blockDim.x) % stride;
    size_t base = first;
    for (; base + (UNROLL - 1) * stride < nvec; base += UNROLL * stride) {
      float4 x[UNROLL], y[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {  // all loads first: UNROLL vectors in flight
        if (kind == READ || kind == COPY || kind == TRIAD) x[u] = b[base + u * stride];
        if (kind == TRIAD) y[u] = c[base + u * stride];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const size_t v = base + u * stride;
        if (kind == READ) acc += (x[u].x + x[u].y) + (x[u].z + x[u].w);
        if (kind == WRITE) a[v] = (v & 1) ? w1 : w0;
        if (kind == COPY) a[v] = x[u];
        if (kind == TRIAD)
          a[v] = make_float4(fmaf(s, y[u].x, x[u].x), fmaf(s, y[u].y, x[u].y),
                             fmaf(s, y[u].z, x[u].z), fmaf(s, y[u].w, x[u].w));
      }
    }
    for (; base < nvec; base += stride) {  // tail: fewer than UNROLL vectors left
      float4 x = make_float4(0, 0, 0, 0), y = x;
      if (kind == READ || kind == COPY || kind == TRIAD) x = b[base];
      if (kind == TRIAD) y = c[base];
      if (kind == READ) acc += (x.x + x.y) + (x.z + x.w);
      if (kind == WRITE) a[base] = (base & 1) ? w1 : w0;
      if (kind == COPY) a[base] = x;
      if (kind == TRIAD)
        a[base] = make_float4(fmaf(s, y.x, x.x), fmaf(s, y.y, x.y), fmaf(s, y.z, x.z),
                              fmaf(s, y.w, x.w));
    }
  }
  if (kind == READ) partial[tid] = acc;
}

__global__ void check_kernel(const float4* out, size_t nvec, int kind, float s,
                             unsigned long long* bad) {
  unsigned long long nbad = 0;
  for (size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x; v < nvec;
       v += (size_t)gridDim.x * blockDim.x) {
    float4 o = out[v];
    float got[4] = {o.x, o.y, o.z, o.w};
    for (int k = 0; k < 4; ++k) {
      size_t i = 4 * v + k;
      float want = kind == WRITE ? pat(i, 3) : kind == COPY ? pat(i, 0)
                                                            : fmaf(s, pat(i, 1), pat(i, 0));
      nbad += got[k] != want;  // NaN poison never compares equal
    }
  }
  if (nbad) atomicAdd(bad, nbad);
}

struct Buffers {
  float4 *a, *b, *c;
  float* partial;
  size_t nvec;
};

static void run_case(bench::Csv& csv, const bench::Device& dev, Buffers& B, int kind, size_t nvec,
                     int passes, bool l2, bench::L2Flush* flush, int warmup, int reps) {
  const float s = 0.5f;
  void (*kern)(float4*, const float4*, const float4*, size_t, int, float, float*) =
      kind == READ ? stream_kernel<READ> : kind == WRITE ? stream_kernel<WRITE>
                   : kind == COPY ? stream_kernel<COPY> : stream_kernel<TRIAD>;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, THREADS, 0));
  const int grid = dev.sms * per_sm;
  // Inputs: b = pat(.,0), c = pat(.,1); output a poisoned.
  init_kernel<<<dev.sms * 8, 256>>>(B.b, nvec, 0);
  CK_LAUNCH();
  init_kernel<<<dev.sms * 8, 256>>>(B.c, nvec, 1);
  CK_LAUNCH();
  if (kind != READ) bench::poison(B.a, nvec * sizeof(float4));
  auto launch = [&](cudaStream_t st) {
    kern<<<grid, THREADS, 0, st>>>(B.a, B.b, B.c, nvec, passes, s, B.partial);
    CK_LAUNCH();
  };
  bench::Stats stt = bench::time_it(launch, warmup, reps, flush);
  const double elems = 4.0 * nvec;
  if (kind == READ) {
    std::vector<float> part(grid * (size_t)THREADS);
    CK(cudaMemcpy(part.data(), B.partial, part.size() * 4, cudaMemcpyDeviceToHost));
    double got = 0;
    for (float x : part) got += x;
    double want = (elems / 8.0) * 28.0 * passes;  // pattern 0..7 repeats; elems % 8 == 0
    if (got != want) FAIL("load_stream sum %.17g != %.17g", got, want);
  } else {
    unsigned long long* bad;
    CK(cudaMalloc(&bad, sizeof *bad));
    CK(cudaMemset(bad, 0, sizeof *bad));
    check_kernel<<<dev.sms * 8, 256>>>(B.a, nvec, kind, s, bad);
    CK_LAUNCH();
    unsigned long long nb;
    CK(cudaMemcpy(&nb, bad, sizeof nb, cudaMemcpyDeviceToHost));
    CK(cudaFree(bad));
    if (nb) FAIL("%s: %llu of %.0f elements wrong or unwritten", kOp[kind], nb, elems);
  }
  const int in = kind == READ ? 1 : kind == WRITE ? 0 : kind == COPY ? 1 : 2;
  const int out = kind == READ ? 0 : 1;
  const double bytes = elems * 4.0 * (in + out) * passes;
  const double flop = kind == TRIAD ? 2.0 * elems * passes : 0.0;
  std::string shape = bench::fmt(
      "{\"pattern\":\"A\",\"elements\":%.0f,\"element_bytes\":4,\"inputs\":%d,\"outputs\":%d,"
      "\"passes\":%d,\"bytes\":%.0f%s}",
      elems, in, out, passes, bytes, l2 ? ",\"level\":\"l2\"" : "");
  csv.time_row(kOp[kind], "fp32", shape, stt, flop, bytes,
               bench::fmt("grid %d x %d threads (persistent, %d vectors in flight/thread)%s",
                          grid, THREADS, UNROLL,
                          l2 ? "; L2-resident, no flush" : "; L2 flushed before each rep"));
}

int main() {
  bench::Device dev;
  bench::Csv csv("hbm", dev.prop.name, "perfmodel microbenchmark (CUDA C++, float4 streams)");
  bench::header();
  bench::L2Flush flush;
  // HBM: 4 GiB per array.
  const size_t hbm_nvec = (4ull << 30) / sizeof(float4);
  Buffers B;
  B.nvec = hbm_nvec;
  CK(cudaMalloc(&B.a, hbm_nvec * sizeof(float4)));
  CK(cudaMalloc(&B.b, hbm_nvec * sizeof(float4)));
  CK(cudaMalloc(&B.c, hbm_nvec * sizeof(float4)));
  CK(cudaMalloc(&B.partial, (size_t)dev.sms * 4 * THREADS * sizeof(float)));
  for (int k = READ; k <= TRIAD; ++k) run_case(csv, dev, B, k, hbm_nvec, 1, false, &flush, 2, 15);
  // L2-resident: the arrays a kind touches total L2/4, re-streamed `passes` times per launch.
  const size_t l2 = (size_t)dev.prop.l2CacheSize;
  for (int k = READ; k <= TRIAD; ++k) {
    const int arrays = k == READ || k == WRITE ? 1 : k == COPY ? 2 : 3;
    size_t nvec = l2 / 4 / arrays / sizeof(float4);
    nvec -= nvec % 2;  // keep element count a multiple of 8 for the closed-form read sum
    run_case(csv, dev, B, k, nvec, 200, true, nullptr, 2, 15);
  }
  CK(cudaFree(B.a));
  CK(cudaFree(B.b));
  CK(cudaFree(B.c));
  CK(cudaFree(B.partial));
  return 0;
}
