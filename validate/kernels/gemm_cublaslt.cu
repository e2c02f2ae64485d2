// cuBLASLt GEMM, bf16 and fp8 e4m3 (scaled, bf16 output), Y[M,N] = X[M,K] W[N,K]^T:
// square M=N=K from 512 to 16384 (powers of 2 plus 6144 and 12288) and decode-shaped skinny
// GEMMs, M = 1..256 tokens against the weight shapes (N, K) of Llama-3-8B and -70B layers
// (fused QKV, O projection, fused gate+up, down) unsharded (TP1) and 8-way tensor-parallel (TP8:
// column-parallel layers split N, row-parallel layers split K). L2 is flushed before every timed
// run so decode weights come from HBM as in a real forward pass. Inputs are uniform random (never
// zeros); outputs are poisoned and 256 sampled entries checked against a double reference.
#include "lt.h"

struct Shape { int m, n, k; std::string tag; };

static std::vector<Shape> shapes() {
  std::vector<Shape> v;
  for (int s : {512, 1024, 2048, 4096, 6144, 8192, 12288, 16384}) v.push_back({s, s, s, "square"});
  struct Model { const char* name; int hidden, heads, kv_heads, head_dim, ffn; };
  const Model models[] = {{"llama3-8b", 4096, 32, 8, 128, 14336},
                          {"llama3-70b", 8192, 64, 8, 128, 28672}};
  for (const Model& md : models) {
    for (int tp : {1, 8}) {
      const int qkv = (md.heads + 2 * md.kv_heads) * md.head_dim;
      const struct { const char* layer; int n, k; } layers[] = {
          {"qkv", qkv / tp, md.hidden},                     // column-parallel
          {"o_proj", md.hidden, md.heads * md.head_dim / tp},  // row-parallel
          {"gate_up", 2 * md.ffn / tp, md.hidden},         // column-parallel
          {"down", md.hidden, md.ffn / tp}};               // row-parallel
      for (auto& l : layers)
        for (int m : {1, 2, 4, 8, 16, 32, 64, 128, 256})
          v.push_back({m, l.n, l.k, bench::fmt("%s.%s.tp%d", md.name, l.layer, tp)});
    }
  }
  return v;
}

int main() {
  bench::Device dev;
  int ver = (int)cublasLtGetVersion();
  bench::Csv csv("gemm_cublaslt", dev.prop.name, bench::fmt("cuBLASLt %d", ver));
  bench::header();
  cublasLtHandle_t h;
  CKLT(cublasLtCreate(&h));
  bench::L2Flush flush;
  const auto list = shapes();
  size_t max_w = 0, max_x = 0, max_y = 0;
  for (auto& s : list) {
    max_w = std::max(max_w, (size_t)s.n * s.k);
    max_x = std::max(max_x, (size_t)s.m * s.k);
    max_y = std::max(max_y, (size_t)s.m * s.n);
  }
  void *W, *X, *Y, *ws;
  const size_t ws_bytes = 64ull << 20;
  CK(cudaMalloc(&W, max_w * 2));
  CK(cudaMalloc(&X, max_x * 2));
  CK(cudaMalloc(&Y, max_y * 2));
  CK(cudaMalloc(&ws, ws_bytes));
  float* scales;  // fp8 dequantization scales (device pointers, as cuBLASLt requires)
  const float sa = 0.5f, sb = 0.25f;
  CK(cudaMalloc(&scales, 2 * sizeof(float)));
  float hs[2] = {sa, sb};
  CK(cudaMemcpy(scales, hs, sizeof hs, cudaMemcpyHostToDevice));
  uint32_t seed = 1;
  for (bool fp8 : {false, true}) {
    for (const Shape& s : list) {
      ++seed;
      const size_t eb = fp8 ? 1 : 2;
      if (fp8) {
        bench::fill_uniform((__nv_fp8_e4m3*)W, (size_t)s.n * s.k, seed, 1.0f);
        bench::fill_uniform((__nv_fp8_e4m3*)X, (size_t)s.m * s.k, seed + 7919, 1.0f);
      } else {
        bench::fill_uniform((__nv_bfloat16*)W, (size_t)s.n * s.k, seed, 1.0f);
        bench::fill_uniform((__nv_bfloat16*)X, (size_t)s.m * s.k, seed + 7919, 1.0f);
      }
      bench::poison(Y, (size_t)s.m * s.n * 2);
      lt::Gemm g;
      if (!g.setup(h, s.m, s.n, s.k, fp8, W, X, Y, ws, ws_bytes, scales, scales + 1)) {
        g.destroy();
        continue;  // reported on stderr; not a failure of the harness
      }
      const double flop = 2.0 * s.m * s.n * s.k;
      const int reps = flop > 1e12 ? 10 : 20;
      bench::Stats st = bench::time_it([&](cudaStream_t strm) { g.run(strm); }, 2, reps, &flush);
      if (fp8)
        lt::check((const __nv_fp8_e4m3*)W, (const __nv_fp8_e4m3*)X, (const __nv_bfloat16*)Y, s.m,
                  s.n, s.k, sa, sb, seed, "fp8 gemm");
      else
        lt::check((const __nv_bfloat16*)W, (const __nv_bfloat16*)X, (const __nv_bfloat16*)Y, s.m,
                  s.n, s.k, 1.f, 1.f, seed, "bf16 gemm");
      const double bytes = (double)s.n * s.k * eb + (double)s.m * s.k * eb + (double)s.m * s.n * 2;
      std::string shape = bench::fmt("{\"M\":%d,\"N\":%d,\"K\":%d,\"layout\":\"TN\",\"out\":"
                                     "\"bf16\",\"tag\":\"%s\"}", s.m, s.n, s.k, s.tag.c_str());
      csv.time_row("gemm", fp8 ? "fp8_e4m3" : "bf16", shape, st, flop, bytes,
                   g.algo_note + "; L2 flushed before each rep; random inputs" +
                       (fp8 ? "; per-tensor scales via A/B scale pointers" : ""));
      g.destroy();
    }
  }
  CK(cudaFree(W));
  CK(cudaFree(X));
  CK(cudaFree(Y));
  CK(cudaFree(ws));
  CK(cudaFree(scales));
  CKLT(cublasLtDestroy(h));
  return 0;
}
