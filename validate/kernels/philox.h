// Philox4x32-R (Salmon et al., SC11) generating dropout masks, shared by philox.cu and
// rng_gemm.cu. One call maps a 128-bit counter and a 64-bit key to 128 random bits; each element
// consumes 8 bits (FlashAttention-2's dropout: 16 elements per call) and is kept when its byte is
// >= the drop threshold. Outputs: one 0/1 byte per element, or packed mask bits (8 calls per
// thread-iteration -> 128 bits -> one 16-byte store).
// Round keys are precomputed once per thread outside the loop (FA4's
// philox_precompute_round_keys), so the per-call work is the rounds themselves: per round 2
// mul.wide.u32 (IMAD.WIDE.U32) and two 3-input XORs, written as one explicit LOP3 each when
// FOLD, else as plain C XORs left to the compiler (run_gpu.sh records the SASS of both).
// The counter's upper words are run-time values (as FA2's offsets are): constant zeros there let
// the compiler drop the first round's second multiply.
#pragma once
#include <cstdint>

namespace philox {

constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;

struct U4 { uint32_t x, y, z, w; };

__host__ __device__ inline uint32_t xor3(uint32_t a, uint32_t b, uint32_t c, bool fold) {
#ifdef __CUDA_ARCH__
  if (fold) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
#endif
  // Left to the compiler. ptxas 13.0 fuses a ^ b ^ c into one LOP3 on its own (even two
  // separate asm xor.b32 statements), so both variants give the same SASS there; the rows carry
  // lop3_fold = true for both and name the source form in "xor_source".
  (void)fold;
  return a ^ b ^ c;
}

template <int R, bool FOLD>
__host__ __device__ inline U4 philox(U4 c, const uint32_t (&k0)[R], const uint32_t (&k1)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    uint64_t p0 = (uint64_t)M0 * c.x;  // mul.wide.u32 -> IMAD.WIDE.U32
    uint64_t p1 = (uint64_t)M1 * c.z;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c = U4{xor3(hi1, c.y, k0[r], FOLD), lo1, xor3(hi0, c.w, k1[r], FOLD), lo0};
  }
  return c;
}

template <int R>
__host__ __device__ inline void round_keys(uint32_t seed0, uint32_t seed1, uint32_t (&k0)[R],
                                           uint32_t (&k1)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    k0[r] = seed0 + (uint32_t)r * W0;
    k1[r] = seed1 + (uint32_t)r * W1;
  }
}

// Keep mask of 4 elements (one byte each of `r`): 0x01 in each byte whose value >= threshold.
__host__ __device__ inline uint32_t keep4(uint32_t r, uint32_t thresh4) {
#ifdef __CUDA_ARCH__
  return __vcmpgeu4(r, thresh4) & 0x01010101u;
#else
  uint32_t m = 0;
  for (int b = 0; b < 4; ++b)
    m |= (((r >> (8 * b)) & 0xFF) >= (thresh4 & 0xFF) ? 1u : 0u) << (8 * b);
  return m;
#endif
}
// Four 0x01/0x00 bytes -> 4 bits (byte b -> bit b) with one multiply: the partial products of
// 0x10204080 put byte b's bit at position 28 + b with no carries into bits 28..31.
__host__ __device__ inline uint32_t pack4(uint32_t m) { return (m * 0x10204080u) >> 28; }

// Counter of call `i`: (lo, hi, stream, stream ^ 0x5bd1e995); the same on host and device.
__host__ __device__ inline U4 counter(uint64_t i, uint32_t stream) {
  return U4{(uint32_t)i, (uint32_t)(i >> 32), stream, stream ^ 0x5bd1e995u};
}

// Bytes output: thread-iteration = one call = 16 elements = one 16-byte store.
template <int R, bool FOLD>
__global__ void __launch_bounds__(256) mask_bytes_kernel(uint4* out, uint64_t calls,
                                                         uint32_t seed0, uint32_t seed1,
                                                         uint32_t stream, uint32_t thresh4) {
  uint32_t k0[R], k1[R];
  round_keys<R>(seed0, seed1, k0, k1);
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < calls;
       i += (uint64_t)gridDim.x * blockDim.x) {
    U4 r = philox<R, FOLD>(counter(i, stream), k0, k1);
    out[i] = make_uint4(keep4(r.x, thresh4), keep4(r.y, thresh4), keep4(r.z, thresh4),
                        keep4(r.w, thresh4));
  }
}

// Packed bits: thread-iteration = 8 calls = 128 elements = one 16-byte store. Element e of call
// j (e in 0..15) is bit (16*j + e) of the 128-bit group.
template <int R, bool FOLD>
__global__ void __launch_bounds__(256) mask_bits_kernel(uint4* out, uint64_t groups,
                                                        uint32_t seed0, uint32_t seed1,
                                                        uint32_t stream, uint32_t thresh4) {
  uint32_t k0[R], k1[R];
  round_keys<R>(seed0, seed1, k0, k1);
  for (uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; g < groups;
       g += (uint64_t)gridDim.x * blockDim.x) {
    uint32_t w[4];
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      uint32_t bits = 0;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        U4 r = philox<R, FOLD>(counter(8 * g + 2 * h + j, stream), k0, k1);
        uint32_t b16 = pack4(keep4(r.x, thresh4)) | pack4(keep4(r.y, thresh4)) << 4 |
                       pack4(keep4(r.z, thresh4)) << 8 | pack4(keep4(r.w, thresh4)) << 12;
        bits |= b16 << (16 * j);
      }
      w[h] = bits;
    }
    out[g] = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

}  // namespace philox
