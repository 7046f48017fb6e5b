// CUDA gemm (cuBLASLt) against the CPU twin: all transpose combinations, f32 / bf16 / f16 inputs
// with f32 or input-dtype output, odd shapes, batches with batched or shared b, leading-dim
// strides, alpha / beta, K = 0, and the plan cache (a repeated shape adds no plan).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "cuda/cuda_test_util.h"
#include "ops/cuda/gemm_cublaslt.h"
#include "ops/gemm.h"

namespace vela {
namespace {

using test::CudaTest;

class CudaGemmTest : public CudaTest {};

// fp32 accumulation in a different order plus one rounding of the output.
test::Tol gemm_tol(DType out_dt, int64_t k) {
  const double acc = 1e-5 * std::sqrt(static_cast<double>(k) + 1.0);
  test::Tol t = test::tol_for(out_dt);
  return {acc + (out_dt == DType::kF32 ? 1e-6 : t.atol * 0.1),
          out_dt == DType::kF32 ? 1e-5 : t.rtol};
}

// Compares ops::gemm on the GPU with ops::gemm on the CPU for the same inputs.
void check_gemm(const Tensor& a, const Tensor& b, const Tensor& c0, bool ta, bool tb, float alpha,
                float beta, const std::string& what) {
  Tensor want = c0.clone();
  ops::gemm(a, b, want, ta, tb, alpha, beta);
  Tensor got = c0.to(Device::cuda(0));
  ops::gemm(a.to(Device::cuda(0)), b.to(Device::cuda(0)), got, ta, tb, alpha, beta);
  const int64_t k = ta ? a.size(-2) : a.size(-1);
  test::expect_close(got, want, gemm_tol(c0.dtype(), k), what);
}

// 1..8 rows against a [N, K] weight (the decode GEMV path), bf16/f16 with f32 or input output,
// including a row-sliced weight (a fused projection's part) and strided rows of a.
TEST_F(CudaGemmTest, DecodeGemvShapesMatchCpu) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (DType out_dt : {dt, DType::kF32}) {
      for (int64_t m = 1; m <= 9; ++m) {
        for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 8}, {13, 1536}, {1000, 264}, {70, 6912}, {3000, 1024}}) {
          std::string what = std::string(dtype_name(dt)) + "->" + dtype_name(out_dt) + " m" +
                             std::to_string(m) + " n" + std::to_string(n) + " k" + std::to_string(k);
          SCOPED_TRACE(what);
          Tensor a = test::random_cpu({m, k}, dt, 1);
          Tensor w = test::random_cpu({n + 8, k}, dt, 2).slice(0, 8, n + 8);
          Tensor c0 = test::random_cpu({m, n}, out_dt, 3);
          check_gemm(a, w, c0, false, true, 1.0f, 0.0f, what);
          check_gemm(a, w, c0, false, true, 0.5f, 0.0f, what + " alpha");
          Tensor wide = test::random_cpu({m, k + 16}, dt, 4).slice(1, 0, k);  // strided rows
          check_gemm(wide, w, c0, false, true, 1.0f, 0.0f, what + " strided a");
        }
      }
    }
  }
}

TEST_F(CudaGemmTest, TransposesDtypesAndOddShapes) {
  const int64_t shapes[][3] = {{1, 1, 1},       {3, 5, 7},      {127, 33, 64},
                               {64, 256, 4096}, {1, 4096, 128}, {257, 129, 3}};
  for (DType dt : test::kCudaFloatDTypes) {
    for (DType out_dt : {dt, DType::kF32}) {
      for (auto& s : shapes) {
        const int64_t m = s[0], n = s[1], k = s[2];
        for (bool ta : {false, true}) {
          for (bool tb : {false, true}) {
            std::string what = std::string(dtype_name(dt)) + "->" + dtype_name(out_dt) + " m" +
                               std::to_string(m) + " n" + std::to_string(n) + " k" +
                               std::to_string(k) + (ta ? " ta" : "") + (tb ? " tb" : "");
            SCOPED_TRACE(what);
            Tensor a = ta ? test::random_cpu({k, m}, dt, 1) : test::random_cpu({m, k}, dt, 1);
            Tensor b = tb ? test::random_cpu({n, k}, dt, 2) : test::random_cpu({k, n}, dt, 2);
            Tensor c0 = test::random_cpu({m, n}, out_dt, 3);
            check_gemm(a, b, c0, ta, tb, 1.0f, 0.0f, what);
            check_gemm(a, b, c0, ta, tb, 0.5f, -1.25f, what + " alpha/beta");
          }
        }
      }
    }
  }
}

TEST_F(CudaGemmTest, BatchedAndSharedB) {
  for (DType dt : test::kCudaFloatDTypes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (ta ? " ta" : "") + (tb ? " tb" : ""));
        const int64_t batch = 3, m = 17, n = 40, k = 96;
        Tensor a =
            ta ? test::random_cpu({batch, k, m}, dt, 4) : test::random_cpu({batch, m, k}, dt, 4);
        Tensor b3 =
            tb ? test::random_cpu({batch, n, k}, dt, 5) : test::random_cpu({batch, k, n}, dt, 5);
        Tensor b2 = tb ? test::random_cpu({n, k}, dt, 6) : test::random_cpu({k, n}, dt, 6);
        Tensor c0 = test::random_cpu({batch, m, n}, dt, 7);
        check_gemm(a, b3, c0, ta, tb, 1.0f, 0.0f, "batched b");
        check_gemm(a, b2, c0, ta, tb, 1.0f, 0.5f, "shared b");
      }
    }
    // Decode-like: one row per batch with a shared weight (folded into a single GEMM).
    Tensor a = test::random_cpu({8, 1, 256}, dt, 8);
    Tensor w = test::random_cpu({512, 256}, dt, 9);
    Tensor c0 = Tensor::zeros({8, 1, 512}, dt);
    check_gemm(a, w, c0, false, true, 1.0f, 0.0f, "rows as batches");
  }
}

TEST_F(CudaGemmTest, LeadingDimStrides) {
  for (DType dt : test::kCudaFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    // Row slices of wider matrices: a [m, k] inside [m, k + 8], b [k, n] inside [k, n + 16],
    // c [m, n] inside [m, n + 4].
    const int64_t m = 33, n = 48, k = 72;
    Tensor a_wide = test::random_cpu({m, k + 8}, dt, 10);
    Tensor b_wide = test::random_cpu({k, n + 16}, dt, 11);
    Tensor c_wide = test::random_cpu({m, n + 4}, DType::kF32, 12);
    Tensor a = a_wide.slice(1, 0, k), b = b_wide.slice(1, 16, 16 + n);
    Tensor want_wide = c_wide.clone();
    Tensor want = want_wide.slice(1, 0, n);
    ops::gemm(a, b, want, false, false, 1.0f, 1.0f);
    Tensor got_wide = c_wide.to(gpu());
    Tensor got = got_wide.slice(1, 0, n);
    ops::gemm(a_wide.to(gpu()).slice(1, 0, k), b_wide.to(gpu()).slice(1, 16, 16 + n), got, false,
              false, 1.0f, 1.0f);
    test::expect_close(got_wide, want_wide, gemm_tol(DType::kF32, k), "strided lds");
  }
}

TEST_F(CudaGemmTest, ZeroInnerDimScalesC) {
  Tensor a = Tensor::empty({4, 0}, DType::kF32), b = Tensor::empty({0, 5}, DType::kF32);
  Tensor c0 = test::random_cpu({4, 5}, DType::kF32, 13);
  check_gemm(a, b, c0, false, false, 1.0f, 0.0f, "k=0 beta=0");
  check_gemm(a, b, c0, false, false, 1.0f, 2.0f, "k=0 beta=2");
}

TEST_F(CudaGemmTest, RepeatedShapeReusesThePlan) {
  Tensor a = test::random_cpu({96, 160}, DType::kBF16, 14).to(gpu());
  Tensor b = test::random_cpu({160, 224}, DType::kBF16, 15).to(gpu());
  Tensor c = Tensor::empty({96, 224}, DType::kBF16, gpu());
  ops::gemm(a, b, c);
  const int64_t n_plans = ops::cuda::gemm_plan_cache_size(0);
  const cuda::AllocatorStats s0 = cuda::allocator_stats(0);
  for (int i = 0; i < 5; ++i) ops::gemm(a, b, c);
  EXPECT_EQ(ops::cuda::gemm_plan_cache_size(0), n_plans);
  EXPECT_EQ(cuda::allocator_stats(0).n_device_mallocs, s0.n_device_mallocs);  // workspace reused
  Tensor c2 = Tensor::empty({96, 224}, DType::kF32, gpu());
  ops::gemm(a, b, c2);  // new output dtype: one new plan
  EXPECT_EQ(ops::cuda::gemm_plan_cache_size(0), n_plans + 1);
}

TEST_F(CudaGemmTest, Tf32IsOptIn) {
  if (std::getenv("VELA_ALLOW_TF32") == nullptr) {
    EXPECT_FALSE(ops::cuda::gemm_allow_tf32());
  }
  if (ops::cuda::gemm_allow_tf32()) GTEST_SKIP() << "TF32 enabled by VELA_ALLOW_TF32";
  // a needs 12 significant bits (TF32 keeps 11), b is in {-1, 0, 1}, every partial sum is an
  // integer below 2^24: exact in fp32, wrong in TF32.
  Tensor a = test::random_ints({64, 64}, DType::kF32, 16, 2049, 4096);
  Tensor b = test::random_ints({64, 64}, DType::kF32, 17, -1, 2);
  Tensor want = Tensor::empty({64, 64}, DType::kF32);
  ops::gemm(a, b, want);
  Tensor got = Tensor::empty({64, 64}, DType::kF32, gpu());
  ops::gemm(a.to(gpu()), b.to(gpu()), got);
  test::expect_equal(got, want, "f32 exact");
}

}  // namespace
}  // namespace vela
