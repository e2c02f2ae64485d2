// Philox4x32-7 and -10 dropout-mask generation (docs/hardware-notes.md §6, §9 (d)): time per mask,
// random 32-bit words per second, for byte masks (16 elements per call) and packed bit masks,
// with the 3-input XORs as explicit LOP3 or left to the compiler. Output bytes are the only HBM
// traffic. Checks: the keep fraction over all elements against (256 - threshold)/256 (catches
// unwritten poison: 0xFF bytes are not 0/1, and poisoned bit words are all ones), and a
// bit-exact comparison of three 64 KiB windows with the host implementation.
#include "bench.h"
#include "philox.h"
#include <cmath>
#include <cstring>

using philox::U4;
using philox::keep4;
using philox::pack4;
using philox::round_keys;
using philox::counter;
using philox::mask_bytes_kernel;
using philox::mask_bits_kernel;

constexpr uint32_t SEED0 = 0x2545F491u, SEED1 = 0x9E3779B9u, STREAM = 0x3C6EF372u;
constexpr uint32_t THRESH = 26;  // drop probability 26/256 ~ 0.10
constexpr uint32_t THRESH4 = THRESH * 0x01010101u;

__global__ void count_kernel(const uint32_t* w, size_t nwords, bool bytes,
                             unsigned long long* ones, unsigned long long* bad) {
  unsigned long long n1 = 0, nb = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nwords;
       i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = w[i];
    if (bytes) {
      nb += (x & 0xFEFEFEFEu) != 0;  // a byte other than 0/1
      n1 += __popc(x);
    } else {
      n1 += __popc(x);
    }
  }
  atomicAdd(ones, n1);
  atomicAdd(bad, nb);
}

// Host reference of the 16 output bytes (bytes mode) or 16 mask bits of call i.
template <int R>
static U4 host_call(uint64_t i) {
  uint32_t k0[R], k1[R];
  round_keys<R>(SEED0, SEED1, k0, k1);
  return philox::philox<R, false>(counter(i, STREAM), k0, k1);
}

template <int R>
static void verify_window(const uint8_t* got, size_t byte_off, size_t nbytes, bool bytes) {
  for (size_t b = 0; b < nbytes; b += 16) {
    size_t pos = byte_off + b;  // 16-byte unit index = call (bytes) or group (bits)
    uint32_t want[4];
    if (bytes) {
      U4 r = host_call<R>(pos / 16);
      uint32_t w4[4] = {r.x, r.y, r.z, r.w};
      for (int k = 0; k < 4; ++k) want[k] = keep4(w4[k], THRESH4);
    } else {
      uint64_t g = pos / 16;
      for (int h = 0; h < 4; ++h) {
        uint32_t bits = 0;
        for (int j = 0; j < 2; ++j) {
          U4 r = host_call<R>(8 * g + 2 * h + j);
          uint32_t b16 = pack4(keep4(r.x, THRESH4)) | pack4(keep4(r.y, THRESH4)) << 4 |
                         pack4(keep4(r.z, THRESH4)) << 8 | pack4(keep4(r.w, THRESH4)) << 12;
          bits |= b16 << (16 * j);
        }
        want[h] = bits;
      }
    }
    if (memcmp(got + b, want, 16) != 0)
      FAIL("philox4x32-%d %s: 16-byte unit at byte %zu differs from the host reference", R,
           bytes ? "bytes" : "mask_bits", pos);
  }
}

template <int R, bool FOLD>
static void run(bench::Csv& csv, const bench::Device& dev, uint8_t* out, uint64_t elements,
                bool bytes, bench::L2Flush& flush) {
  const size_t out_bytes = bytes ? elements : elements / 8;
  const uint64_t units = out_bytes / 16;  // calls (bytes) or 8-call groups (bits)
  auto kern = bytes ? mask_bytes_kernel<R, FOLD> : mask_bits_kernel<R, FOLD>;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 256, 0));
  const int grid = dev.sms * per_sm;
  bench::poison(out, out_bytes);
  auto launch = [&](cudaStream_t s) {
    kern<<<grid, 256, 0, s>>>((uint4*)out, units, SEED0, SEED1, STREAM, THRESH4);
    CK_LAUNCH();
  };
  bench::Stats st = bench::time_it(launch, 3, 20, &flush);
  // Full-coverage statistical check, then bit-exact windows at the start, middle and end.
  unsigned long long* cnt;
  CK(cudaMalloc(&cnt, 2 * sizeof(unsigned long long)));
  CK(cudaMemset(cnt, 0, 2 * sizeof(unsigned long long)));
  count_kernel<<<dev.sms * 8, 256>>>((const uint32_t*)out, out_bytes / 4, bytes, cnt, cnt + 1);
  CK_LAUNCH();
  unsigned long long h[2];
  CK(cudaMemcpy(h, cnt, sizeof h, cudaMemcpyDeviceToHost));
  CK(cudaFree(cnt));
  if (h[1]) FAIL("philox4x32-%d: %llu words hold bytes other than 0/1 (unwritten?)", R, h[1]);
  double keep = (double)h[0] / (double)elements, want = (256.0 - THRESH) / 256.0;
  if (fabs(keep - want) > 1e-4) FAIL("philox4x32-%d keep fraction %.6f, expected %.6f", R, keep, want);
  const size_t win = 64 << 10;
  std::vector<uint8_t> hbuf(win);
  for (size_t off : {(size_t)0, (out_bytes / 2) & ~(size_t)15, out_bytes - win}) {
    CK(cudaMemcpy(hbuf.data(), out + off, win, cudaMemcpyDeviceToHost));
    verify_window<R>(hbuf.data(), off, win, bytes);
  }
  const double calls = (double)elements * 8 / 128;
  std::string shape = bench::fmt(
      "{\"elements\":%llu,\"generator\":\"philox4x32-%d\",\"bits_per_element\":8,"
      "\"output\":\"%s\",\"lop3_fold\":true,\"xor_source\":\"%s\",\"precomputed_keys\":true}",
      (unsigned long long)elements, R, bytes ? "bytes" : "mask_bits",
      FOLD ? "explicit_lop3" : "plain_xor");
  double sec = st.median_ms * 1e-3;
  csv.time_row("rng", "u8", shape, st, 0.0, (double)out_bytes,
               bench::fmt("philox calls=%.6g; random 32-bit words/s=%.4g; keep fraction %.6f; "
                          "grid %d x 256 (persistent); L2 flushed before each rep",
                          calls, 4 * calls / sec, keep, grid));
}

int main() {
  bench::Device dev;
  bench::Csv csv("philox", dev.prop.name, "perfmodel microbenchmark (CUDA C++ Philox4x32)");
  bench::header();
  bench::L2Flush flush;
  const uint64_t elements = 1ull << 30;
  uint8_t* out;
  CK(cudaMalloc(&out, elements));
  for (bool bytes : {true, false}) {
    run<7, true>(csv, dev, out, elements, bytes, flush);
    run<7, false>(csv, dev, out, elements, bytes, flush);
    run<10, true>(csv, dev, out, elements, bytes, flush);
    run<10, false>(csv, dev, out, elements, bytes, flush);
  }
  CK(cudaFree(out));
  return 0;
}
