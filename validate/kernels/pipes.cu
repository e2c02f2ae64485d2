// Per-SM-per-clock throughput of single SASS instructions, alone and interleaved in pairs, to
// settle docs/hardware-notes.md §9 (a)-(c): is IMAD.WIDE.U32 full or half rate, do IMAD and FFMA
// share the FMA-heavy pipe, do LOP3/IADD3 (ALU) overlap with IMAD (FMA-heavy), do MUFU.EX2 and
// I2F share the XU pipe, and which pipe packs FP32 into FP8 (E4M3) and FP16 pairs: attention's
// P -> FP8/FP16 conversion, modeled as XU work beside the exponentials (perfmodel/ops/attention.py
// FP8_PACK_XU_PER_SCORE) and as ALU work for FP16. And the rate of Ampere-style mma.sync
// (HMMA.16816.F32) on Hopper, alone and beside MUFU.EX2 / FFMA: FlashAttention-2's MMA path,
// modeled as MMA_SYNC_FRACTION of the wgmma rate with its softmax partly overlapped.
//
// Method: every thread runs K independent dependency chains per instruction kind in a loop
// unrolled U times, so issue, not latency, limits the rate. The grid is exactly one full wave
// (SMs x max resident CTAs), so every SM is busy. Each CTA records %smid and clock64() at start
// and end; per SM, thread-ops executed there / (last end - first start) in SM cycles is the rate.
// Wall time (CUDA events) gives the implied SM clock as a cross-check. Each instruction is
// written as inline PTX (opaque to NVVM, so no algebraic folding of the chains), and
// run_gpu.sh counts the SASS opcodes per kernel so the intended instruction can be confirmed.
// The final state of every chain is stored and a sample of threads is re-run on the host
// (bit-exact for everything but ex2.approx, which is range-checked).
#include "bench.h"
#include <cmath>
#include <cstring>
#include <map>

enum Op { NONE, FFMA, IMAD, IMADWIDE, IMADHI, LOP3, IADD3, EX2, I2F, I2F16, F2E4M3, F2F16, HMMA };
static const char* kSass[] = {"", "FFMA", "IMAD", "IMAD.WIDE.U32", "IMAD.HI.U32", "LOP3.LUT",
                              "IADD3", "MUFU.EX2", "I2FP.F32.U32", "I2F.U16",
                              "F2FP.SATFINITE.E4M3.F32.PACK_AB", "F2FP.F16.F32.PACK_AB",
                              "HMMA.16816.F32"};
// u32->f32 compiles to I2FP.F32.U32 on sm_90 (not the I2F.U32 of older parts); I2F.U16 is the
// sub-word conversion quack measured at 1/8 rate on the XU pipe, kept to test XU sharing with EX2.

constexpr int K = 8;       // independent chains per instruction kind per thread
constexpr int U = 8;       // rounds per loop iteration (even: LOP3/IADD3 ping-pong two buffers)
constexpr int THREADS = 512;

// Chain state for one instruction kind: u32 x/y (ping-pong for cross-chain LOP3/IADD3), f32, u64.
struct St {
  uint32_t x[K], y[K];
  float f[K];
  uint64_t w[K];
  float acc[K][4];  // HMMA: one m16n8k16 FP32 accumulator fragment per chain
};

struct Params { uint32_t p, q; float fp, fq; uint64_t c64; uint32_t h2; };

__host__ __device__ inline uint32_t i_lop3(uint32_t a, uint32_t b, uint32_t c) {
#ifdef __CUDA_ARCH__
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  return a ^ b ^ c;
#endif
}
__host__ __device__ inline uint32_t i_add3(uint32_t a, uint32_t b, uint32_t c) {
#ifdef __CUDA_ARCH__
  uint32_t d;  // two dependent adds: ptxas fuses them into one IADD3 (checked in the SASS)
  asm("{.reg .s32 t; add.s32 t, %1, %2; add.s32 %0, t, %3;}" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  return a + b + c;
#endif
}
__host__ __device__ inline uint32_t i_mad(uint32_t a, uint32_t b, uint32_t c) {
#ifdef __CUDA_ARCH__
  uint32_t d;
  asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  return a * b + c;
#endif
}
__host__ __device__ inline uint32_t i_madhi(uint32_t a, uint32_t b, uint32_t c) {
#ifdef __CUDA_ARCH__
  uint32_t d;
  asm("mad.hi.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  return (uint32_t)(((uint64_t)a * b) >> 32) + c;
#endif
}
// Philox's form: a 32x32->64 product with no addend (IMAD.WIDE.U32 Rd, Ra, Rb, RZ), both halves
// used: product i of the next round multiplies hi(w[i]) by lo(w[i-1]). Pure products lose bits
// (low halves gather trailing zeros, high halves shrink) and reach zero within ~30 rounds, so once
// per U rounds each chain is XORed with a constant (2 LOP3 per 8 IMAD.WIDE, on the ALU pipe, not
// counted in the rate). Forms with a 64-bit addend (w = a*b + w) were tried and rejected: ptxas
// 13.0 splits them into IMAD.WIDE.U32 ..., RZ plus IADD3 + IADD3.X, i.e. 2 ALU ops per product.
__host__ __device__ inline uint64_t i_mulwide(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  uint64_t d;
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(d) : "r"(a), "r"(b));
  return d;
#else
  return (uint64_t)a * b;
#endif
}
__host__ __device__ inline float f_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  float d;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
  return d;
#else
  return fmaf(a, b, c);
#endif
}
// 2^(-x): the negation folds into MUFU.EX2's operand modifier; values stay in (0.5, 1].
__device__ inline float f_ex2neg(float a) {
  float d;
  asm("{.reg .f32 t; neg.f32 t, %1; ex2.approx.ftz.f32 %0, t;}" : "=f"(d) : "f"(a));
  return d;
}
// u32 -> f32 (round to nearest); the result's bits feed the next conversion, so the chain is
// conversions only.
__host__ __device__ inline uint32_t i_u2f(uint32_t a) {
#ifdef __CUDA_ARCH__
  float d;
  asm("cvt.rn.f32.u32 %0, %1;" : "=f"(d) : "r"(a));
  return __float_as_uint(d);
#else
  float d = (float)a;
  uint32_t r;
  memcpy(&r, &d, 4);
  return r;
#endif
}

// u16 (the high half of the previous result's bits) -> f32: I2F.U16 with a half-word selector,
// so the chain is conversions only; the high half of a float's bits never collapses to zero.
__host__ __device__ inline uint32_t i_u16f(uint32_t a) {
#ifdef __CUDA_ARCH__
  float d;
  asm("{.reg .u16 l, h; mov.b32 {l, h}, %1; cvt.rn.f32.u16 %0, h;}" : "=f"(d) : "r"(a));
  return __float_as_uint(d);
#else
  float d = (float)(a >> 16);
  uint32_t r;
  memcpy(&r, &d, 4);
  return r;
#endif
}

// FP32 pair -> packed E4M3 pair (cvt.rn.satfinite.e4m3x2.f32, 2 values per instruction). The
// chain reads the previous result's bits as the next float (its upper half holds the two FP8
// bytes, so values stay finite: satfinite never emits the NaN byte); ptxas may need a PRMT to
// place the 16-bit result, which the SASS counts show. No host re-run: only throughput matters.
__device__ inline uint32_t i_f2e4m3(uint32_t a, float b) {
  uint32_t d;
  asm("{.reg .b16 t, lo; .reg .f32 fa; mov.b32 fa, %1; mov.b16 lo, 0x3c00;"
      " cvt.rn.satfinite.e4m3x2.f32 t, fa, %2; mov.b32 %0, {lo, t};}"
      : "=r"(d) : "r"(a), "f"(b));
  return d;
}
// FP32 pair -> packed FP16 pair (cvt.rn.f16x2.f32), chained the same way.
__device__ inline uint32_t i_f2f16(uint32_t a, float b) {
  uint32_t d;
  asm("{.reg .f32 fa; mov.b32 fa, %1; cvt.rn.f16x2.f32 %0, fa, %2;}" : "=r"(d) : "r"(a), "f"(b));
  return d;
}

// One warp-wide m16n8k16 FP16 MMA with FP32 accumulation (2*16*8*16 = 4096 FLOP per warp, 128
// per thread); A and B are the same small f16x2 constant, so the accumulators stay finite.
__device__ inline void hmma(float (&c)[4], uint32_t h2) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%4,%4},"
      " {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(h2));
}

// One round: K instructions of kind `op`. `r` (compile-time after unrolling) picks the ping-pong
// direction for the cross-chain kinds, whose three inputs come from three different chains so no
// two consecutive LOP3s/IADD3s can be merged.
template <int op>
__host__ __device__ inline void round(St& s, const Params& P, int r) {
#pragma unroll
  for (int i = 0; i < K; ++i) {
    if (op == FFMA) s.f[i] = f_fma(s.f[i], P.fp, P.fq);
    if (op == IMAD) s.x[i] = i_mad(s.x[i], P.p, P.q);
    if (op == IMADHI) s.x[i] = i_madhi(s.x[i], P.p, P.q);
    if (op == I2F) s.x[i] = i_u2f(s.x[i]);
    if (op == I2F16) s.x[i] = i_u16f(s.x[i]);
#ifdef __CUDA_ARCH__
    if (op == EX2) s.f[i] = f_ex2neg(s.f[i]);
    if (op == F2E4M3) s.x[i] = i_f2e4m3(s.x[i], P.fp);
    if (op == F2F16) s.x[i] = i_f2f16(s.x[i], P.fp);
    if (op == HMMA) hmma(s.acc[i], P.h2);
#endif
  }
  if (op == IMADWIDE) {
    uint64_t old[K];
#pragma unroll
    for (int i = 0; i < K; ++i) old[i] = r == 0 ? s.w[i] ^ P.c64 : s.w[i];
#pragma unroll
    for (int i = 0; i < K; ++i)
      s.w[i] = i_mulwide((uint32_t)(old[i] >> 32), (uint32_t)old[(i + K - 1) % K]);
  }
  if (op == LOP3 || op == IADD3) {
    uint32_t* src = (r & 1) ? s.y : s.x;
    uint32_t* dst = (r & 1) ? s.x : s.y;
#pragma unroll
    for (int i = 0; i < K; ++i) {
      uint32_t a = src[i], b = src[(i + 1) % K], c = src[(i + 3) % K];
      dst[i] = op == LOP3 ? i_lop3(a, b, c) : i_add3(a, b, c);
    }
  }
}

__host__ __device__ inline void init_state(St& s, uint32_t gid, int which) {
  for (int i = 0; i < K; ++i) {
    uint32_t h = bench::hash32(((uint64_t)gid << 8) | (uint64_t)(which * K + i));
    s.x[i] = h | 1u;
    s.y[i] = 0;
    s.f[i] = 0.25f + (h >> 8) * (0.5f / 16777216.0f);
    s.w[i] = ((uint64_t)bench::hash32(h) << 32) | h;
    for (int j = 0; j < 4; ++j) s.acc[i][j] = 0.0f;
  }
}

__host__ __device__ inline uint32_t fold_state(const St& s, int op) {
  uint32_t r = 0;
  for (int i = 0; i < K; ++i) {
    if (op == FFMA || op == EX2) {
      float f = s.f[i];
      uint32_t b;
      memcpy(&b, &f, 4);
      r = r * 31u + b;
    } else if (op == HMMA) {
      for (int j = 0; j < 4; ++j) {
        uint32_t b;
        memcpy(&b, &s.acc[i][j], 4);
        r = r * 31u + b;
      }
    } else if (op == IMADWIDE) {
      r = r * 31u + (uint32_t)s.w[i] + (uint32_t)(s.w[i] >> 32);
    } else {
      r = r * 31u + s.x[i];
    }
  }
  return r;
}

struct ClockRec { long long start, end; int smid, pad; };

template <int A, int B>
__global__ void __launch_bounds__(THREADS) pipe_kernel(int iters, Params P, uint32_t* out,
                                                       ClockRec* clk) {
  uint32_t gid = blockIdx.x * blockDim.x + threadIdx.x;
  St a, b;
  init_state(a, gid, 0);
  init_state(b, gid, 1);
  __syncthreads();
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int r = 0; r < U; ++r) {
      round<A>(a, P, r);
      if (B != NONE) round<B>(b, P, r);
    }
  }
  __syncthreads();
  long long t1 = clock64();
  out[2 * gid] = fold_state(a, A);
  out[2 * gid + 1] = B != NONE ? fold_state(b, B) : 0u;
  if (threadIdx.x == 0) {
    uint32_t smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    clk[blockIdx.x] = {t0, t1, (int)smid, 0};
  }
}

// Host re-run of one thread for the bit-exact kinds.
static void round_host(St& s, const Params& P, int r, int op) {
  switch (op) {
    case FFMA: round<FFMA>(s, P, r); break;
    case IMAD: round<IMAD>(s, P, r); break;
    case IMADWIDE: round<IMADWIDE>(s, P, r); break;
    case IMADHI: round<IMADHI>(s, P, r); break;
    case LOP3: round<LOP3>(s, P, r); break;
    case IADD3: round<IADD3>(s, P, r); break;
    case I2F: round<I2F>(s, P, r); break;
    case I2F16: round<I2F16>(s, P, r); break;
    default: break;
  }
}
static uint32_t host_thread(int op, uint32_t gid, int which, int iters, const Params& P) {
  St s;
  init_state(s, gid, which);
  for (int it = 0; it < iters; ++it)
    for (int r = 0; r < U; ++r) round_host(s, P, r, op);
  return fold_state(s, op);
}

struct Variant {
  int a, b;
  void (*kernel)(int, Params, uint32_t*, ClockRec*);
  int iters;  // sized so each launch runs ~0.3-3 ms at the documented rates
};

#define V(A, B, IT) Variant{A, B, pipe_kernel<A, B>, IT}
static const Variant kVariants[] = {
    V(FFMA, NONE, 4096),   V(IMAD, NONE, 2048),  V(IMADWIDE, NONE, 2048),
    V(IMADHI, NONE, 2048), V(LOP3, NONE, 2048),  V(IADD3, NONE, 2048),
    V(EX2, NONE, 512),     V(I2F, NONE, 2048),   V(I2F16, NONE, 256),
    V(IMADWIDE, FFMA, 2048), V(LOP3, IMAD, 2048), V(EX2, I2F, 512), V(EX2, I2F16, 256),
    V(IADD3, IMAD, 2048),  V(LOP3, FFMA, 2048),
    V(F2E4M3, NONE, 512),  V(F2F16, NONE, 1024),  V(EX2, F2E4M3, 512), V(F2F16, IADD3, 1024),
    V(HMMA, NONE, 256),    V(HMMA, EX2, 256),     V(HMMA, FFMA, 256),
};

int main() {
  bench::Device dev;
  bench::Csv csv("pipes", dev.prop.name, "perfmodel microbenchmark (inline PTX, nvcc sm_90a)");
  bench::header();
  // h2: two FP16 values of 2^-8 (A = B): 16 products of 2^-16 per MMA output keep the FP32
  // accumulators far from overflow over any run here
  Params P{0x9E3779B9u, 0x7F4A7C15u, 0.999f, 1e-4f, 0xD2511F53CD9E8D57ull, 0x1C001C00u};
  const int warmup = 2, reps = 10;
  for (const Variant& v : kVariants) {
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.kernel, THREADS, 0));
    if (per_sm < 1) FAIL("kernel %s+%s cannot launch", kSass[v.a], kSass[v.b]);
    int grid = dev.sms * per_sm;  // exactly one full wave
    size_t threads = (size_t)grid * THREADS;
    uint32_t* out;
    ClockRec* clk;
    CK(cudaMalloc(&out, threads * 2 * sizeof(uint32_t)));
    CK(cudaMalloc(&clk, grid * sizeof(ClockRec)));
    bench::poison(out, threads * 2 * sizeof(uint32_t));
    auto launch = [&](cudaStream_t s) {
      v.kernel<<<grid, THREADS, 0, s>>>(v.iters, P, out, clk);
      CK_LAUNCH();
    };
    bench::Stats st = bench::time_it(launch, warmup, reps);
    // Clock records of the last repetition: per-SM span from the first CTA start to the last end.
    std::vector<ClockRec> rec(grid);
    CK(cudaMemcpy(rec.data(), clk, grid * sizeof(ClockRec), cudaMemcpyDeviceToHost));
    std::map<int, std::pair<long long, long long>> span;
    std::map<int, int> ctas;
    for (auto& r : rec) {
      auto it = span.find(r.smid);
      if (it == span.end()) span[r.smid] = {r.start, r.end};
      else it->second = {std::min(it->second.first, r.start), std::max(it->second.second, r.end)};
      ctas[r.smid]++;
    }
    const int nops = (v.b == NONE ? 1 : 2);
    const double ops_per_thread_each = (double)v.iters * U * K;  // per instruction kind
    std::vector<double> rates, cycles;
    for (auto& kv : span) {
      double cyc = (double)(kv.second.second - kv.second.first);
      double ops = ctas[kv.first] * (double)THREADS * ops_per_thread_each * nops;
      rates.push_back(ops / cyc);
      cycles.push_back(cyc);
    }
    std::sort(rates.begin(), rates.end());
    std::sort(cycles.begin(), cycles.end());
    double rate = rates[rates.size() / 2];
    double cyc_med = cycles[cycles.size() / 2];
    // Verify: every thread wrote its outputs (poison gone is not enough: compare a sample with the
    // host re-run; ex2.approx is not bit-reproducible on the host, so check its range instead).
    std::vector<uint32_t> h(threads * 2);
    CK(cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost));
    for (size_t t = 0; t < threads; t += threads / 7 + 1) {
      for (int which = 0; which < nops; ++which) {
        int op = which == 0 ? v.a : v.b;
        uint32_t got = h[2 * t + which];
        if (op == EX2 || op == F2E4M3 || op == F2F16 || op == HMMA) continue;  // no host re-run
        uint32_t want = host_thread(op, (uint32_t)t, which, v.iters, P);
        if (got != want) FAIL("%s thread %zu: device %08x host %08x", kSass[op], t, got, want);
      }
    }
    // Every thread must have replaced the poison (0xFFFFFFFF is not a fold any chain produces
    // here: for EX2 the folded values are finite floats in (0.5, 1]).
    for (size_t t = 0; t < threads; ++t)
      if (h[2 * t] == 0xFFFFFFFFu) FAIL("%s thread %zu never wrote its result", kSass[v.a], t);
    std::string instr = std::string("[\"") + kSass[v.a] + "\"" +
                        (v.b == NONE ? "" : std::string(",\"") + kSass[v.b] + "\"") + "]";
    std::string shape = bench::fmt("{\"instr\":%s,\"ratio\":%s,\"chains_per_thread\":%d,"
                                   "\"threads_per_sm\":%d}", instr.c_str(),
                                   v.b == NONE ? "[1]" : "[1,1]", K, per_sm * THREADS);
    double total_ops = (double)threads * ops_per_thread_each * nops;
    std::string notes = bench::fmt(
        "per-SM rate from clock64 spans, median over %zu SMs (min %.4g, max %.4g); "
        "each instruction kind gets half when paired; kernel %s; "
        "median SM span %.0f cycles; implied SM clock %.0f MHz (span / event time); "
        "thread-ops/SM/ns from wall time %.4g; ctas/SM %d x %d threads",
        rates.size(), rates.front(), rates.back(), st.notes().c_str(), cyc_med,
        cyc_med / (st.median_ms * 1e3), total_ops / dev.sms / (st.median_ms * 1e6), per_sm,
        THREADS);
    if (v.a == HMMA) notes += "; HMMA: one thread-op = 128 FLOP (m16n8k16 per warp / 32)";
    csv.row("pipe_throughput", v.a == HMMA ? "fp16" : v.a == FFMA || v.a == EX2 ? "fp32" : "u32",
            shape, "thread_ops_per_sm_per_clk", rate, "ops/clk/SM", notes);
    CK(cudaFree(out));
    CK(cudaFree(clk));
  }
  return 0;
}
