// The fused flash attention kernels (ops/cuda/attention_flash.cu, selected with
// VELA_CUDA_DENSE_ATTN=flash) against the CPU f32 twin on the same bf16/f16-rounded inputs:
// forward out and lse, backward dq, dk, dv (with the saved lse and without it). Each tensor's
// max abs error relative to max |reference| is printed and must stay below 2e-2 (bf16) / 5e-3
// (f16). Shapes cover T = 1, T not a multiple of the 64-row tile, GQA n_rep 1 and 6, head_dim 32,
// 64 and 128, batch > 1 and doc ids with many documents, 1-token documents and unsorted ids; every
// other head_dim class (256, whose dK/dV is split over two blocks, and the padded 40, 48, 80, 96,
// 136, 200). Also: the backward is bit-identical run to run (head_dim 64 and 256), and opt-in
// benchmarks (DISABLED_*Bench*) print ms and TFLOP/s of flash and the GEMM path at bench-1b's
// shape and at head_dim 256. Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/stream.h"
#include "cuda/cuda_test_util.h"
#include "ops/attention.h"
#include "ops/cast.h"

namespace vela {
namespace {

using test::random_cpu;

Tensor f32(const Tensor& t) { return ops::to_dtype(t.to(Device::cpu()), DType::kF32); }

// max |got - want| / max |want|, printed.
double rel_err(const Tensor& got, const Tensor& want, const std::string& what) {
  const std::vector<double> g = test::to_doubles(got), w = test::to_doubles(want);
  double max_err = 0.0, max_ref = 0.0;
  bool finite = true;
  for (size_t i = 0; i < g.size(); ++i) {
    finite = finite && std::isfinite(g[i]);
    max_err = std::max(max_err, std::fabs(g[i] - w[i]));
    max_ref = std::max(max_ref, std::fabs(w[i]));
  }
  const double rel = finite ? max_err / std::max(max_ref, 1e-30) : INFINITY;
  std::printf("  %-44s max abs err %.3e  max|ref| %.3e  rel %.3e\n", what.c_str(), max_err, max_ref,
              rel);
  return rel;
}

enum class Docs { kNone, kRuns, kTiny, kUnsorted };

struct Case {
  int64_t b, t, h, hkv, d;
  Docs docs;
};

std::string case_name(const Case& c, DType dt) {
  const char* docs[] = {"no docs", "doc runs", "1-token docs", "unsorted docs"};
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s B=%lld T=%lld H=%lld Hkv=%lld D=%lld %s", dtype_name(dt),
                static_cast<long long>(c.b), static_cast<long long>(c.t),
                static_cast<long long>(c.h), static_cast<long long>(c.hkv),
                static_cast<long long>(c.d), docs[static_cast<int>(c.docs)]);
  return buf;
}

Tensor make_docs(const Case& c, uint64_t seed) {
  if (c.docs == Docs::kNone) return Tensor();
  std::vector<int32_t> ids(static_cast<size_t>(c.b * c.t));
  std::mt19937 gen(static_cast<unsigned>(seed));
  for (int64_t bi = 0; bi < c.b; ++bi) {
    int32_t doc = 0;
    for (int64_t t = 0; t < c.t; ++t) {
      int32_t& id = ids[static_cast<size_t>(bi * c.t + t)];
      switch (c.docs) {
        case Docs::kRuns:  // documents of 1..90 tokens
          if (t > 0 && gen() % 45 == 0) ++doc;
          id = doc;
          break;
        case Docs::kTiny:  // stretches of 1-token documents between longer ones
          if (t > 0 && (t % 50 < 8 || gen() % 30 == 0)) ++doc;
          id = doc;
          break;
        default:  // ids that come back after other documents (not supported by packing, but legal)
          id = static_cast<int32_t>((t / 7) % 3 + 10 * bi);
          break;
      }
    }
  }
  return Tensor::from_vector(ids, {c.b, c.t});
}

class CudaFlashAttention : public test::CudaTest {
 protected:
  void SetUp() override {
    test::CudaTest::SetUp();
    setenv("VELA_CUDA_DENSE_ATTN", "flash", 1);
  }
  void TearDown() override { unsetenv("VELA_CUDA_DENSE_ATTN"); }
};

void check_case(const Case& c, DType dt, Device gpu) {
  const std::string what = case_name(c, dt);
  std::printf("%s\n", what.c_str());
  const double tol = dt == DType::kBF16 ? 2e-2 : 5e-3;
  const uint64_t seed = static_cast<uint64_t>(c.t * 131 + c.d * 7 + c.h);
  Tensor q = random_cpu({c.b, c.t, c.h, c.d}, dt, seed, -2.0, 2.0);
  Tensor k = random_cpu({c.b, c.t, c.hkv, c.d}, dt, seed + 1, -2.0, 2.0);
  Tensor v = random_cpu({c.b, c.t, c.hkv, c.d}, dt, seed + 2);
  Tensor dout = random_cpu(q.shape(), dt, seed + 3);
  Tensor docs = make_docs(c, seed + 4);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));

  // CPU reference in f32 on the rounded inputs; the backward's `out` is the reference output
  // rounded to dt (what the GPU backward receives too).
  Tensor cq = f32(q), ck = f32(k), cv = f32(v), cd = f32(dout);
  Tensor out = Tensor::empty(q.shape(), DType::kF32),
         lse = Tensor::empty({c.b, c.h, c.t}, DType::kF32);
  ops::causal_attention(cq, ck, cv, docs, scale, out, lse);
  Tensor out_dt = ops::to_dtype(out, dt), cout = f32(out_dt);
  Tensor wq = Tensor::empty(q.shape(), DType::kF32), wk = Tensor::empty(k.shape(), DType::kF32),
         wv = Tensor::empty(k.shape(), DType::kF32);
  ops::causal_attention_backward(cq, ck, cv, docs, scale, cout, cd, wq, wk, wv);

  Tensor gq = q.to(gpu), gk = k.to(gpu), gv = v.to(gpu),
         gdocs = docs.defined() ? docs.to(gpu) : docs;
  Tensor gout = Tensor::empty(q.shape(), dt, gpu);
  Tensor glse = Tensor::empty({c.b, c.h, c.t}, DType::kF32, gpu);
  ops::causal_attention(gq, gk, gv, gdocs, scale, gout, glse);
  EXPECT_LT(rel_err(gout, out, "out"), tol) << what;
  // lse is compared in absolute terms (an O(1)-O(10) quantity): 2e-2 covers bf16 scores.
  const double lse_err = rel_err(glse, lse, "lse") * std::max(1.0, [&] {
                           double m = 0.0;
                           for (double x : test::to_doubles(lse)) m = std::max(m, std::fabs(x));
                           return m;
                         }());
  EXPECT_LT(lse_err, tol * 4) << what << " (lse abs error)";

  for (bool with_lse : {true, false}) {
    Tensor dq = Tensor::empty(q.shape(), dt, gpu), dk = Tensor::empty(k.shape(), dt, gpu),
           dv = Tensor::empty(k.shape(), dt, gpu);
    ops::causal_attention_backward(gq, gk, gv, gdocs, scale, out_dt.to(gpu), dout.to(gpu), dq, dk,
                                   dv, with_lse ? glse : Tensor());
    const std::string how = with_lse ? " (saved lse)" : " (recomputed lse)";
    EXPECT_LT(rel_err(dq, wq, "dq" + how), tol) << what << how;
    EXPECT_LT(rel_err(dk, wk, "dk" + how), tol) << what << how;
    EXPECT_LT(rel_err(dv, wv, "dv" + how), tol) << what << how;
  }
}

TEST_F(CudaFlashAttention, MatchesCpu) {
  const Case cases[] = {
      {1, 1, 2, 1, 64, Docs::kNone},        // T = 1
      {2, 100, 6, 1, 64, Docs::kRuns},      // T not a multiple of 64, n_rep 6, B > 1
      {1, 257, 4, 4, 64, Docs::kNone},      // n_rep 1, a 1-row last tile
      {2, 200, 6, 2, 128, Docs::kTiny},     // head_dim 128, 1-token documents
      {1, 300, 2, 2, 128, Docs::kRuns},     //
      {2, 130, 2, 1, 32, Docs::kUnsorted},  // head_dim 32, unsorted doc ids
      {1, 64, 4, 2, 64, Docs::kTiny},       // exactly one tile
  };
  for (const Case& c : cases) check_case(c, DType::kBF16, gpu());
  check_case({2, 150, 4, 2, 64, Docs::kRuns}, DType::kF16, gpu());
}

TEST_F(CudaFlashAttention, AnyHeadDimMatchesCpu) {
  for (int64_t d : {48, 80, 96, 256, 40, 136, 200}) {
    check_case({1, 130, 4, 2, d, Docs::kNone}, DType::kBF16, gpu());
    check_case({2, 100, 6, 1, d, Docs::kRuns}, DType::kBF16, gpu());
  }
  check_case({1, 150, 4, 4, 256, Docs::kTiny}, DType::kF16, gpu());
  check_case({1, 150, 4, 2, 80, Docs::kNone}, DType::kF16, gpu());
}

// Long rows where the online softmax crosses many key tiles and doc skipping removes most of them.
TEST_F(CudaFlashAttention, LongSequenceMatchesCpu) {
  check_case({1, 1100, 6, 1, 64, Docs::kRuns}, DType::kBF16, gpu());
  check_case({1, 700, 2, 2, 64, Docs::kNone}, DType::kBF16, gpu());
}

class CudaFlashDeterminism : public CudaFlashAttention,
                             public ::testing::WithParamInterface<int64_t> {};

TEST_P(CudaFlashDeterminism, BackwardIsDeterministic) {
  const Case c{2, 300, 6, 2, GetParam(), Docs::kRuns};
  const DType dt = DType::kBF16;
  Tensor q = random_cpu({c.b, c.t, c.h, c.d}, dt, 1).to(gpu());
  Tensor k = random_cpu({c.b, c.t, c.hkv, c.d}, dt, 2).to(gpu());
  Tensor v = random_cpu({c.b, c.t, c.hkv, c.d}, dt, 3).to(gpu());
  Tensor dout = random_cpu(q.shape(), dt, 4).to(gpu());
  Tensor docs = make_docs(c, 5).to(gpu());
  Tensor out = Tensor::empty(q.shape(), dt, gpu()),
         lse = Tensor::empty({c.b, c.h, c.t}, DType::kF32, gpu());
  ops::causal_attention(q, k, v, docs, 0.125f, out, lse);
  Tensor grads[2][3];
  for (auto& g : grads) {
    g[0] = Tensor::empty(q.shape(), dt, gpu());
    g[1] = Tensor::empty(k.shape(), dt, gpu());
    g[2] = Tensor::empty(k.shape(), dt, gpu());
    ops::causal_attention_backward(q, k, v, docs, 0.125f, out, dout, g[0], g[1], g[2], lse);
  }
  test::expect_equal(grads[1][0], grads[0][0], "dq run 2 vs run 1");
  test::expect_equal(grads[1][1], grads[0][1], "dk run 2 vs run 1");
  test::expect_equal(grads[1][2], grads[0][2], "dv run 2 vs run 1");
  Tensor out2 = Tensor::empty(q.shape(), dt, gpu());
  ops::causal_attention(q, k, v, docs, 0.125f, out2);
  test::expect_equal(out2, out, "forward run 2 vs run 1");
}

INSTANTIATE_TEST_SUITE_P(HeadDims, CudaFlashDeterminism, ::testing::Values(64, 256, 80));

// ---- benchmark (opt-in: --gtest_also_run_disabled_tests --gtest_filter='*Bench*') ----

template <typename F>
double time_ms(F&& fn, int reps) {
  fn();  // warm up (lazy attribute setup, allocator)
  cudaDeviceSynchronize();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, cuda::current_stream());
  for (int r = 0; r < reps; ++r) fn();
  cudaEventRecord(e1, cuda::current_stream());
  cudaEventSynchronize(e1);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms / reps;
}

TEST_F(CudaFlashAttention, DISABLED_BenchBench1b) {
  const DType dt = DType::kBF16;
  struct Cfg {
    int64_t b, t, h, hkv, d;
    bool docs;
  };
  for (Cfg c : {Cfg{8, 2048, 24, 4, 64, false}, Cfg{8, 2048, 24, 4, 64, true},
                Cfg{4, 2048, 16, 4, 128, false}, Cfg{2, 2048, 8, 2, 256, false},
                Cfg{4, 2048, 16, 4, 96, false}}) {
    Tensor q = random_cpu({c.b, c.t, c.h, c.d}, dt, 1).to(gpu());
    Tensor k = random_cpu({c.b, c.t, c.hkv, c.d}, dt, 2).to(gpu());
    Tensor v = random_cpu({c.b, c.t, c.hkv, c.d}, dt, 3).to(gpu());
    Tensor dout = random_cpu(q.shape(), dt, 4).to(gpu());
    Tensor docs;
    if (c.docs) {  // documents of 512 tokens: most key tiles skipped
      std::vector<int32_t> ids(static_cast<size_t>(c.b * c.t));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i % c.t) / 512);
      docs = Tensor::from_vector(ids, {c.b, c.t}).to(gpu());
    }
    Tensor out = Tensor::empty(q.shape(), dt, gpu());
    Tensor lse = Tensor::empty({c.b, c.h, c.t}, DType::kF32, gpu());
    Tensor dq = Tensor::empty(q.shape(), dt, gpu()), dk = Tensor::empty(k.shape(), dt, gpu()),
           dv = Tensor::empty(k.shape(), dt, gpu());
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    // Causal flops (dense, whatever the documents skip): fwd 2 matmuls of B*H*T*T/2*D MACs.
    const double fwd_flops = 2.0 * 2.0 * c.b * c.h * static_cast<double>(c.t) * c.t * c.d / 2.0;
    const double bwd_flops = 2.5 * fwd_flops;
    for (const char* path : {"flash", "gemm"}) {
      setenv("VELA_CUDA_DENSE_ATTN", path, 1);
      const double fwd =
          time_ms([&] { ops::causal_attention(q, k, v, docs, scale, out, lse); }, 10);
      const double bwd = time_ms(
          [&] { ops::causal_attention_backward(q, k, v, docs, scale, out, dout, dq, dk, dv, lse); },
          10);
      std::printf(
          "%-5s bf16 B=%lld T=%lld H=%lld Hkv=%lld D=%lld%s: fwd %.3f ms %.1f TFLOP/s, bwd %.3f ms "
          "%.1f TFLOP/s (causal flop count; H200 dense bf16 peak ~989)\n",
          path, static_cast<long long>(c.b), static_cast<long long>(c.t),
          static_cast<long long>(c.h), static_cast<long long>(c.hkv), static_cast<long long>(c.d),
          c.docs ? " docs of 512" : "", fwd, fwd_flops / (fwd * 1e-3) / 1e12, bwd,
          bwd_flops / (bwd * 1e-3) / 1e12);
    }
    setenv("VELA_CUDA_DENSE_ATTN", "flash", 1);
  }
}

}  // namespace
}  // namespace vela
