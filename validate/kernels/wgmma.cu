// Hopper's tensor pipe per 128-deep k-block of FP8 wgmma, three ways a GEMM mainloop can run it:
//   stream         the k-blocks' wgmmas back to back, one group kept in flight (wait_group 1):
//                  the pipe's steady rate, what a plain FP8 GEMM mainloop gets;
//   drain          after every k-block wait for all its wgmmas (wait_group 0) before issuing the
//                  next: CUTLASS's sm90 FP8 blockwise-scaling mainloop does this each k-block
//                  (sm90_mma_tma_gmma_ss_warpspecialized_fp8_blockwise_scaling.hpp: warpgroup_wait<0>
//                  then scale); the difference to `stream` is the pipe's drain and refill;
//   drain_promote  the same, plus the promotion: every FP32 partial sum scaled into a second
//                  accumulator (one FFMA each), as DeepSeek-V3 §3.3.2 and that mainloop do.
// With one warpgroup per CTA nothing hides the drain; with two (CUTLASS's cooperative kernel,
// 128 x 128 tile) the other warpgroup's wgmmas can run in it. perfmodel's block-scaled GEMM model
// (perfmodel/ops/gemm.py) charges the promotion serially but has no drain term; these rows
// measure whether it needs one (gemm_fp8_blockscaled rows are 25-38 % slower than predicted).
//
// Each CTA (one per SM: the shared-memory request leaves room for one) streams `iters` k-blocks of
// wgmma.m64n128k32 e4m3 x 4 per warpgroup from shared memory holding random E4M3 values (|x| < 2,
// no NaN encodings), and records clock64 at start and end; the row value is cycles per k-block,
// the median over SMs. The operand layout (no swizzle, 8 x 16-byte core matrices) is valid but not
// the one a GEMM would use for this data: the products are not checked against the host, only
// that every thread wrote finite sums.
#include "bench.h"

#include <map>

namespace {

constexpr int N = 128;                  // wgmma N (the 128-wide block-scaled tile)
constexpr int K_STEP = 32;              // FP8 wgmma K
constexpr int KBLOCK = 128;             // FP8 block-scaling granularity along K
constexpr int STEPS = KBLOCK / K_STEP;  // wgmmas per k-block
constexpr int A_SLICE = 64 * K_STEP;    // bytes of one warpgroup's A per wgmma (64 x 32)
constexpr int B_SLICE = N * K_STEP;     // bytes of B per wgmma (128 x 32)
constexpr int A_BYTES = STEPS * A_SLICE;
constexpr int B_BYTES = STEPS * B_SLICE;
constexpr int SMEM_REQUEST = 160 * 1024;  // > half of 228 KB: one CTA per SM, as a GEMM's stages
enum Mode { STREAM, DRAIN, DRAIN_PROMOTE };
const char* kModeName[] = {"stream", "drain", "drain_promote"};

// wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address,
// leading- and stride-dimension byte offsets, all >> 4; no swizzle, base offset 0.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
         ((uint64_t)(sbo >> 4) << 32);
}

// D (64 x 128 FP32, 64 registers per thread) (+)= A (64 x 32 e4m3) * B (32 x 128 e4m3)
__device__ __forceinline__ void wgmma_e4m3(float (&d)[64], uint64_t da, uint64_t db,
                                           int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
      "%55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
        "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),
        "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
        "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
        "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]),
        "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(accumulate));
}

struct ClockRec {
  long long start, end;
  int smid;
};

template <int MODE>
__global__ void __launch_bounds__(256, 1)
    kblocks(int iters, float scale, const uint4* operands, float* out, ClockRec* clk) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int warpgroups = blockDim.x / 128;
  const int bytes = warpgroups * A_BYTES + B_BYTES;
  for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(smem)[i] = operands[i];
  // the generic-proxy stores above must be visible to wgmma's async proxy
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();

  const int wg = threadIdx.x / 128;
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
  const uint32_t a0 = base + wg * A_BYTES, b0 = base + warpgroups * A_BYTES;
  float acc[64], total[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = total[i] = 0.0f;

  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < STEPS; ++s)
      // core matrices 8 rows x 16 bytes: K-adjacent ones 128 B apart, M/N-adjacent ones 256 B
      wgmma_e4m3(acc, smem_desc(a0 + s * A_SLICE, 128, 256), smem_desc(b0 + s * B_SLICE, 128, 256),
                 // promote restarts the partial sums each k-block; the others chain them (a
                 // k-block whose sums nobody reads would be removed by ptxas)
                 MODE == DRAIN_PROMOTE ? (s > 0) : 1);
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    if (MODE == STREAM) {
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    } else {
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      if (MODE == DRAIN_PROMOTE) {
#pragma unroll
        for (int i = 0; i < 64; ++i) total[i] = fmaf(acc[i], scale, total[i]);
      }
    }
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  long long t1 = clock64();

  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) sum += (MODE == DRAIN_PROMOTE ? total[i] : acc[i]);
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  if (threadIdx.x == 0) {
    int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    clk[blockIdx.x] = {t0, t1, smid};
  }
}

using KernelFn = void (*)(int, float, const uint4*, float*, ClockRec*);
const KernelFn kKernels[] = {kblocks<STREAM>, kblocks<DRAIN>, kblocks<DRAIN_PROMOTE>};

__global__ void fill_e4m3(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = (uint8_t)(bench::hash32(i + seed) & 0xBF);  // exponent field <= 7: |x| < 2, no NaN
}

}  // namespace

int main() {
  bench::Device dev;
  if (dev.prop.major != 9) {
    fprintf(stderr, "wgmma needs compute capability 9.x (sm_90a); this is %d.%d\n",
            dev.prop.major, dev.prop.minor);
    return 2;
  }
  bench::Csv csv("wgmma", dev.prop.name, "perfmodel microbenchmark (inline PTX wgmma, sm_90a)");
  bench::header();
  const int iters = 4096, warmup = 2, reps = 10;
  const int grid = dev.sms;
  uint8_t* operands;
  float* out;
  ClockRec* clk;
  CK(cudaMalloc(&operands, 2 * A_BYTES + B_BYTES));
  CK(cudaMalloc(&out, (size_t)grid * 256 * sizeof(float)));
  CK(cudaMalloc(&clk, grid * sizeof(ClockRec)));
  fill_e4m3<<<64, 256>>>(operands, 2 * A_BYTES + B_BYTES, 0x5EEDu);
  CK_LAUNCH();
  for (int m = 0; m < 3; ++m)
    CK(cudaFuncSetAttribute(kKernels[m], cudaFuncAttributeMaxDynamicSharedMemorySize,
                            SMEM_REQUEST));
  for (int warpgroups = 1; warpgroups <= 2; ++warpgroups) {
    for (int m = 0; m < 3; ++m) {
      const int threads = 128 * warpgroups;
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernels[m], threads,
                                                       SMEM_REQUEST));
      if (per_sm != 1) FAIL("%s: %d CTAs per SM, expected 1", kModeName[m], per_sm);
      bench::poison(out, (size_t)grid * threads * sizeof(float));
      auto launch = [&](cudaStream_t s) {
        kKernels[m]<<<grid, threads, SMEM_REQUEST, s>>>(iters, 0.5f,
                                                       reinterpret_cast<const uint4*>(operands),
                                                       out, clk);
        CK_LAUNCH();
      };
      bench::Stats st = bench::time_it(launch, warmup, reps);
      std::vector<float> h((size_t)grid * threads);
      CK(cudaMemcpy(h.data(), out, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < h.size(); ++i)
        if (!std::isfinite(h[i])) FAIL("%s, %d warpgroups: thread %zu wrote %g", kModeName[m],
                                       warpgroups, i, h[i]);
      std::vector<ClockRec> rec(grid);
      CK(cudaMemcpy(rec.data(), clk, grid * sizeof(ClockRec), cudaMemcpyDeviceToHost));
      std::vector<double> cycles;
      for (auto& r : rec) cycles.push_back((double)(r.end - r.start) / iters);
      std::sort(cycles.begin(), cycles.end());
      const double per_kblock = cycles[cycles.size() / 2];
      const double flop = 2.0 * 64 * warpgroups * N * KBLOCK * (double)iters * grid;
      const std::string shape = bench::fmt(
          "{\"mode\":\"%s\",\"warpgroups\":%d,\"m\":%d,\"n\":%d,\"k_block\":%d,\"wgmma\":"
          "\"m64n128k32.f32.e4m3.e4m3\",\"iters\":%d}", kModeName[m], warpgroups,
          64 * warpgroups, N, KBLOCK, iters);
      csv.row("wgmma_kblock", "fp8_e4m3", shape, "cycles_per_kblock", per_kblock, "cycles",
              bench::fmt("median over %zu SMs of clock64 span / iters (min %.5g, max %.5g); "
                         "dense FP8 at 8192 FLOP/clk/SM would take %d cycles", cycles.size(),
                         cycles.front(), cycles.back(), 2 * 64 * warpgroups * N * KBLOCK / 8192));
      csv.time_row("wgmma_kblock", "fp8_e4m3", shape, st, flop, 0.0);
    }
  }
  CK(cudaFree(operands));
  CK(cudaFree(out));
  CK(cudaFree(clk));
  return 0;
}
