// CUDA gemm (cuBLASLt) against the CPU twin: all transpose combinations, f32 / bf16 / f16 inputs
// with f32 or input-dtype output, odd shapes, batches with batched or shared b, leading-dim
// strides, alpha / beta, K = 0, the plan cache (a repeated shape adds no plan), and the small-M
// algorithm search (tuned plans against the CPU, the disk cache, a benchmark of bench-1b shapes),
// GEMMs on several streams at once (each stream its own cuBLASLt workspace), the small-batch
// kernels (skinny GEMM, the Hopper wgmma GEMM with cp.async or TMA loads, its gate|up form with
// SiLU * up in the epilogue) and opt-in benchmarks of them against cuBLASLt.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/cuda/stream.h"
#include "core/json.h"
#include "cuda/cuda_test_util.h"
#include "ops/cuda/bench_cuda.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_cublaslt.h"
#include "ops/fused_gemm.h"
#include "ops/gemm.h"
#include "ops/gemm_tuning.h"
#include "ops/swiglu.h"

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

// Puts the small-batch GEMM kernels back to their defaults (VELA_SKINNY_GEMM, VELA_WGMMA_GEMM)
// when a test that forced them on or off ends.
struct RestoreSmallGemmKernels {
  ~RestoreSmallGemmKernels() {
    ops::cuda::gemm_skinny_set_enabled(-1);
#ifdef VELA_HAS_SM90A
    ops::cuda::gemm_wgmma_set_enabled(-1);
    ops::cuda::gemm_wgmma_set_tma(-1);
#endif
  }
};

using Shapes = std::vector<std::pair<int64_t, int64_t>>;

// a[m, k] @ w[n, k]^T against the CPU for every m and (n, k), bf16/f16 with f32 or input output,
// w a row slice of a larger weight (a fused projection's part); for the m where `full(m)` also
// alpha and strided rows of a.
template <typename Full>
void check_small_m(const std::vector<int64_t>& ms, const Shapes& shapes, Full full) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (DType out_dt : {dt, DType::kF32}) {
      for (int64_t m : ms) {
        for (auto [n, k] : shapes) {
          std::string what = std::string(dtype_name(dt)) + "->" + dtype_name(out_dt) + " m" +
                             std::to_string(m) + " n" + std::to_string(n) + " k" +
                             std::to_string(k);
          SCOPED_TRACE(what);
          Tensor a = test::random_cpu({m, k}, dt, 1);
          Tensor w = test::random_cpu({n + 8, k}, dt, 2).slice(0, 8, n + 8);
          Tensor c0 = test::random_cpu({m, n}, out_dt, 3);
          check_gemm(a, w, c0, false, true, 1.0f, 0.0f, what);
          if (full(m)) {
            check_gemm(a, w, c0, false, true, 0.5f, 0.0f, what + " alpha");
            Tensor wide = test::random_cpu({m, k + 16}, dt, 4).slice(1, 0, k);  // strided rows
            check_gemm(wide, w, c0, false, true, 1.0f, 0.0f, what + " strided a");
          }
        }
      }
    }
  }
}

// 1..9 rows against a [N, K] weight (1..2: the decode GEMV; 3..9: the wgmma GEMM on sm_90, and
// 3..8 the skinny tensor-core GEMM, checked with the wgmma GEMM off too: split-K at 2048 x 1536,
// 1536 x 6912 and 70 x 6912, a partial last 64-column tile and a partial last 64-wide K chunk; 9
// elsewhere: cuBLASLt), with alpha and strided rows of a.
TEST_F(CudaGemmTest, DecodeGemvShapesMatchCpu) {
  const Shapes shapes = {{1, 8},       {13, 1536},   {1000, 264},  {70, 6912},
                         {3000, 1024}, {2048, 1536}, {1536, 6912}, {5000, 520}};
  check_small_m({1, 2, 3, 4, 5, 6, 7, 8, 9}, shapes, [](int64_t) { return true; });
#ifdef VELA_HAS_SM90A
  RestoreSmallGemmKernels restore;
  ops::cuda::gemm_wgmma_set_enabled(0);
  check_small_m({3, 8}, shapes, [](int64_t) { return true; });  // the skinny GEMM on sm_90
#endif
}

// 3..64 rows against a [N, K] weight through the wgmma GEMM (forced on up to its 64 rows; on
// other GPUs these go to the skinny GEMM and cuBLASLt): split-K over a cluster (the narrow
// shapes) and none (20000 x 256: more column tiles than SMs), a partial last 128-column tile and
// a partial last 64-wide K chunk.
TEST_F(CudaGemmTest, SmallBatchShapesMatchCpu) {
#ifdef VELA_HAS_SM90A
  RestoreSmallGemmKernels restore;
  ops::cuda::gemm_wgmma_set_enabled(1);
  const int sms = vela::cuda::device_properties().multiProcessorCount;
  EXPECT_GT(ops::cuda::wgmma_gemm_splits(2048, 1536, sms), 1);
  EXPECT_EQ(ops::cuda::wgmma_gemm_splits(20000, 256, std::min(sms, 150)), 1);
  // A device that cannot hold clusters of 8 (a MIG slice) gets fewer K ranges, never more.
  EXPECT_EQ(ops::cuda::wgmma_gemm_splits(2048, 1536, 132, 2), 2);
  EXPECT_EQ(ops::cuda::wgmma_gemm_splits(2048, 1536, 132, 1), 1);
  // Clusters past the portable 8: about a block per SM, never more blocks than SMs past 8.
  EXPECT_EQ(ops::cuda::wgmma_gemm_splits(1536, 6912, 132, 16), 11);  // bench-1b's down: 12 x 11
  EXPECT_EQ(ops::cuda::wgmma_gemm_splits(1536, 1536, 132, 16), 11);  // o
  EXPECT_EQ(ops::cuda::wgmma_gemm_splits(2048, 1536, 132, 16), 8);   // q|k|v: 16 x 8, not x 9
  EXPECT_EQ(ops::cuda::wgmma_gemm_splits(1536, 6912, 132, 8), 8);
#endif
  check_small_m({3, 16, 37, 64},
                {{13, 1536}, {1000, 264}, {2048, 1536}, {1536, 6912}, {20000, 256}, {5000, 520}},
                [](int64_t m) { return m == 37; });
}

// The wgmma GEMM with its loads by cp.async (SmallBatchShapesMatchCpu runs the default, TMA):
// split-K over a cluster and none, partial last column tiles and K chunks.
TEST_F(CudaGemmTest, CpAsyncWgmmaGemmMatchesCpu) {
#ifdef VELA_HAS_SM90A
  RestoreSmallGemmKernels restore;
  ops::cuda::gemm_wgmma_set_enabled(1);
  ops::cuda::gemm_wgmma_set_tma(0);
  check_small_m({3, 17, 64},
                {{13, 1536}, {1000, 264}, {2048, 1536}, {1536, 6912}, {20000, 256}, {5000, 520}},
                [](int64_t m) { return m == 17; });
#else
  GTEST_SKIP() << "built without sm_90a";
#endif
}

// gemm_silu_mul (act = silu_and_mul(a @ w^T), w = gate | up) against its CPU twin: the TMA
// wgmma kernel's SiLU * up epilogue (split-K over a cluster at narrow inter, none at 20000; a
// partial last tile), and rows past its 64 (gemm + silu_and_mul).
TEST_F(CudaGemmTest, GemmSiluMulMatchesCpu) {
#ifdef VELA_HAS_SM90A
  RestoreSmallGemmKernels restore;
  ops::cuda::gemm_wgmma_set_enabled(1);  // whatever VELA_WGMMA_GEMM / _ROWS / _TMA say
  ops::cuda::gemm_wgmma_set_tma(1);
  const cudaDeviceProp& prop = vela::cuda::device_properties();
  const bool sm90 = prop.major == 9 && prop.minor == 0;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (int64_t m : {3, 17, 64, 65}) {
      for (auto [inter, k] : std::vector<std::pair<int64_t, int64_t>>{
               {6912, 1536}, {1000, 264}, {64, 520}, {20000, 256}}) {
        const std::string what = std::string(dtype_name(dt)) + " m" + std::to_string(m) + " inter" +
                                 std::to_string(inter) + " k" + std::to_string(k);
        SCOPED_TRACE(what);
        Tensor a = test::random_cpu({m, k}, dt, 1);
        Tensor w = test::random_cpu({2 * inter, k}, dt, 2);
        Tensor want = Tensor::empty({m, inter}, dt, Device::cpu());
        ops::gemm_silu_mul(a, w, want);
        Tensor da = a.to(gpu()), dw = w.to(gpu());
        Tensor got = Tensor::empty({m, inter}, dt, gpu());
        EXPECT_EQ(ops::cuda::gemm_wgmma_silu_mul(da, dw, got),
                  sm90 && m > ops::cuda::gemv_max_rows() && m <= 64);
        ops::gemm_silu_mul(da, dw, got);
        const test::Tol t = test::tol_for(dt);
        test::expect_close(
            got, want, {t.atol * 2 + 2e-5 * std::sqrt(static_cast<double>(k)), t.rtol * 2}, what);
      }
    }
  }
#else
  GTEST_SKIP() << "built without sm_90a";
#endif
}

// The split-K of the skinny GEMM (3..8 rows, gemm_skinny.cu) and of the wgmma GEMM (sm_90,
// gemm_wgmma.cu; values checked against the CPU above) sums the partials in split order, so a
// repeated call and a graph replay give the same bits as the first eager call.
TEST_F(CudaGemmTest, SkinnyGemmRepeatsBitForBit) {
  const int sms = vela::cuda::device_properties().multiProcessorCount;
  EXPECT_GT(ops::cuda::skinny_gemm_splits(2048, 1536, sms), 1);  // the split-K path is covered
  RestoreSmallGemmKernels restore;
  // kernel 0: the skinny GEMM (3..8 rows; wgmma off), 1 / 2: the wgmma GEMM (forced on, 3..64
  // rows) with cp.async / TMA loads.
  for (int kernel = 0; kernel < 3; ++kernel) {
#ifdef VELA_HAS_SM90A
    ops::cuda::gemm_wgmma_set_enabled(kernel > 0 ? 1 : 0);
    ops::cuda::gemm_wgmma_set_tma(kernel == 2 ? 1 : 0);
#else
    if (kernel == 1) break;
#endif
    for (DType out_dt : {DType::kBF16, DType::kF32}) {
      for (int64_t m : {3, 8, 16, 64}) {
        if (kernel == 0 && m > ops::cuda::kSkinnyMaxRows) continue;
        for (auto [n, k] : {std::pair<int64_t, int64_t>{2048, 1536}, {1536, 6912}, {5000, 520}}) {
          const std::string what = std::string(kernel == 0 ? "skinny " : "wgmma ") +
                                   std::to_string(kernel) + " " + dtype_name(out_dt) + " m" +
                                   std::to_string(m) + " n" + std::to_string(n) + " k" +
                                   std::to_string(k);
          SCOPED_TRACE(what);
          Tensor da = test::random_cpu({m, k}, DType::kBF16, 1).to(gpu());
          Tensor dw = test::random_cpu({n, k}, DType::kBF16, 2).to(gpu());
          Tensor first = Tensor::empty({m, n}, out_dt, gpu()), again = first.clone();
          ops::gemm(da, dw, first, false, true);
          ops::gemm(da, dw, again, false, true);
          test::expect_equal(again, first, what + " repeated");
          Tensor replayed = Tensor::zeros({m, n}, out_dt, gpu());
          cudaStream_t stream;
          ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
          {
            cuda::StreamGuard sg(stream);
            ops::gemm(da, dw, replayed, false, true);  // the stream's workspace, before capture
            cudaGraphExec_t exec = nullptr;
            ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                      cudaSuccess);
            ops::gemm(da, dw, replayed, false, true);
            cudaGraph_t graph;
            ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
            ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
            cudaGraphDestroy(graph);
            for (int r = 0; r < 3; ++r) {
              cudaMemsetAsync(replayed.data_ptr(), 0, replayed.nbytes(), stream);
              ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
            }
            ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
            cudaGraphExecDestroy(exec);
          }
          test::expect_equal(replayed, first, what + " graph replay");
          ops::cuda::gemm_release_stream(stream, 0);
          cudaStreamDestroy(stream);
        }
      }
    }
  }
}

TEST_F(CudaGemmTest, TransposesDtypesAndOddShapes) {
  const int64_t shapes[][3] = {{1, 1, 1},       {3, 5, 7},      {127, 33, 64},
                               {64, 256, 4096}, {1, 4096, 128}, {257, 129, 3}};
  for (DType dt : test::kFloatDTypes) {
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
  for (DType dt : test::kFloatDTypes) {
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
  for (DType dt : test::kFloatDTypes) {
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
  ops::gemm(a, b, c2);  // new output dtype: one new plan, plus the row bucket's it borrows from
  const int64_t per_shape = ops::cuda::gemm_algo_rows(96) == 96 ? 1 : 2;
  EXPECT_EQ(ops::cuda::gemm_plan_cache_size(0), n_plans + per_shape);
  // 100 rows: the 128-row bucket's algorithm again (one plan), and the CPU's result.
  const int64_t before = ops::cuda::gemm_plan_cache_size(0);
  check_gemm(test::random_cpu({100, 160}, DType::kBF16, 16), b.to(Device::cpu()),
             Tensor::zeros({100, 224}, DType::kF32), false, false, 1.0f, 0.0f, "borrowed plan");
  EXPECT_EQ(ops::cuda::gemm_plan_cache_size(0), before + 1);
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

const ops::GemmTuneRecord* find_record(const std::vector<ops::GemmTuneRecord>& records, int64_t m,
                                       int64_t n, int64_t k, DType in_dt, DType out_dt) {
  for (const auto& r : records)
    if (r.m == m && r.n == n && r.k == k && r.in_dtype == dtype_name(in_dt) &&
        r.out_dtype == dtype_name(out_dt))
      return &r;
  return nullptr;
}

// GEMMs planned inside a tuning session, M = 9..256 against a [N, K] weight (decode batches): each
// gets a tuned plan (a record), and whichever candidate won, the result matches the CPU, including
// alpha / beta on an existing c (the candidates run into scratch, the real c sees one GEMM). N
// values are odd multiples of 8 so no other test made these plans first.
// With VELA_GEMM_TUNE_CACHE set, a second run of this test takes every plan from the file.
TEST_F(CudaGemmTest, TunedSmallMShapesMatchCpu) {
  ops::GemmTuneOptions opts = ops::gemm_tune_options_from_env();
  opts.enabled = true;
  opts.n_candidates = 8;
  opts.n_reps = 2;
  ops::GemmTuningScope tune(opts);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (DType out_dt : {dt, DType::kF32}) {
      for (int64_t m : {9, 16, 24, 64, 100, 256}) {
        for (auto [n, k] : {std::pair<int64_t, int64_t>{1544, 1536}, {264, 1536}, {1528, 6920}}) {
          std::string what = std::string(dtype_name(dt)) + "->" + dtype_name(out_dt) + " m" +
                             std::to_string(m) + " n" + std::to_string(n) + " k" +
                             std::to_string(k);
          SCOPED_TRACE(what);
          Tensor a = test::random_cpu({m, k}, dt, 21);
          Tensor w = test::random_cpu({n, k}, dt, 22);
          Tensor c0 = test::random_cpu({m, n}, out_dt, 23);
          check_gemm(a, w, c0, false, true, 0.5f, 0.75f, what + " alpha beta");
          check_gemm(a, w, c0, false, true, 1.0f, 0.0f, what);
          const ops::GemmTuneRecord* r =
              find_record(ops::gemm_tune_records(0), m, n, k, dt, out_dt);
          ASSERT_NE(r, nullptr) << "no tuned plan for " << what;
          if (!r->from_disk) {
            EXPECT_GE(r->n_candidates, 1);
            EXPECT_LT(r->chosen, r->n_candidates);
            EXPECT_GT(r->best_us, 0.0);
            if (r->heuristic_us > 0) {
              EXPECT_LE(r->best_us, r->heuristic_us);
            }
          }
        }
      }
    }
  }
  // Outside the bounds (8 rows: the GEMV path; 257 rows: prefill) nothing is tuned.
  const size_t n_records = ops::gemm_tune_records(0).size();
  for (int64_t m : {8, 257}) {
    Tensor a = test::random_cpu({m, 1536}, DType::kBF16, 24);
    Tensor w = test::random_cpu({1560, 1536}, DType::kBF16, 25);
    check_gemm(a, w, test::random_cpu({m, 1560}, DType::kBF16, 26), false, true, 1.0f, 0.0f,
               "untuned m" + std::to_string(m));
  }
  EXPECT_EQ(ops::gemm_tune_records(0).size(), n_records);
  int64_t from_disk = 0;
  for (const auto& r : ops::gemm_tune_records(0)) from_disk += r.from_disk;
  std::printf("tuned plans: %zu, from the disk cache: %lld\n", n_records,
              static_cast<long long>(from_disk));
}

// The disk cache: a session with a cache path writes every plan it tuned there (GPU name and
// cuBLASLt version on each entry); a broken file is ignored and left alone. A second process with
// the same VELA_GEMM_TUNE_CACHE takes these plans from the file (from_disk, no timing).
TEST_F(CudaGemmTest, TuningCacheFileIsWrittenAndCheckedOnRead) {
  const std::string dir = ::testing::TempDir() + "vela_gemm_tune_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/gemm.json";
  ops::GemmTuneOptions opts;
  opts.n_candidates = 4;
  opts.n_reps = 1;
  opts.cache_path = path;
  const size_t before = ops::gemm_tune_records(0).size();
  {
    ops::GemmTuningScope tune(opts);
    Tensor a = test::random_cpu({80, 512}, DType::kBF16, 27).to(gpu());
    Tensor w = test::random_cpu({1048, 512}, DType::kBF16, 28).to(gpu());
    Tensor c = Tensor::empty({80, 1048}, DType::kBF16, gpu());
    ops::gemm(a, w, c, false, true);
  }
  const size_t tuned = ops::gemm_tune_records(0).size() - before;
  std::ifstream in(path);
  if (tuned > 0) {
    ASSERT_TRUE(in.good()) << path << " was not written";
    json j = json::parse(in);
    ASSERT_TRUE(j["plans"].is_array());
    EXPECT_GE(j["plans"].size(), tuned);
    const std::string gpu = j["plans"][0]["gpu"].get<std::string>();
    EXPECT_FALSE(gpu.empty());
    EXPECT_EQ(cuda::device_description(0).rfind(gpu, 0), 0u) << gpu;  // "<name>, .. GiB, .."
    EXPECT_TRUE(j["plans"][0]["cublaslt"].is_number_integer());
  }
  {
    std::ofstream bad(dir + "/bad.json");
    bad << "{not json";
  }
  // A broken file is ignored (a warning): the GEMM is tuned and correct, the file left as it was.
  opts.cache_path = dir + "/bad.json";
  {
    ops::GemmTuningScope tune(opts);
    Tensor a = test::random_cpu({80, 512}, DType::kBF16, 29);
    Tensor w = test::random_cpu({1064, 512}, DType::kBF16, 30);
    check_gemm(a, w, test::random_cpu({80, 1064}, DType::kBF16, 31), false, true, 1.0f, 0.0f,
               "with a broken cache file");
  }
  const ops::GemmTuneRecord* r =
      find_record(ops::gemm_tune_records(0), 80, 1064, 512, DType::kBF16, DType::kBF16);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->from_disk);
  std::ifstream again(dir + "/bad.json");
  std::string text((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "{not json");
  std::filesystem::remove_all(dir);
}

// Not a test: the heuristic's first choice against the tuned one for every GEMM of a bench-1b
// decode step at the engine's batch buckets (cold L2, median of 5), with the bytes floor.
TEST_F(CudaGemmTest, DISABLED_BenchSmallMTuning) {
  const double copy = ops::cuda::bench_copy_gbps(size_t{1} << 30);
  struct Shape3 {
    const char* name;
    int64_t n, k;
    DType out;
  };
  const Shape3 shapes[] = {
      {"q", 1536, 1536, DType::kBF16},         {"k|v", 256, 1536, DType::kBF16},
      {"qkv fused", 2048, 1536, DType::kBF16}, {"o", 1536, 1536, DType::kBF16},
      {"gate_up", 13824, 1536, DType::kBF16},  {"down", 1536, 6912, DType::kBF16},
      {"lm_head", 100000, 1536, DType::kF32}};
  ops::GemmTuneOptions opts;
  opts.n_candidates = 24;
  opts.n_reps = 7;
  ops::GemmTuningScope tune(opts);
  std::printf("device copy %.0f GB/s\n%-10s %5s %7s %6s %10s %10s %6s %9s %8s\n", copy, "gemm", "M",
              "N", "K", "heur us", "tuned us", "pick", "GB/s", "of copy");
  for (const Shape3& s : shapes) {
    Tensor w = Tensor::empty({s.n, s.k}, DType::kBF16, gpu());
    const int64_t chunk = std::min<int64_t>(s.n, 2048);
    Tensor block = test::random_cpu({chunk, s.k}, DType::kBF16, 31).to(gpu());
    for (int64_t r = 0; r < s.n; r += chunk) {
      Tensor dst = w.slice(0, r, std::min(s.n, r + chunk));
      dst.copy_(block.slice(0, 0, dst.size(0)));
    }
    for (int64_t m : {16, 32, 48, 64, 128, 256}) {
      Tensor a = test::random_cpu({m, s.k}, DType::kBF16, 32).to(gpu());
      Tensor c = Tensor::empty({m, s.n}, s.out, gpu());
      ops::gemm(a, w, c, false, true);
      const ops::GemmTuneRecord* r =
          find_record(ops::gemm_tune_records(0), m, s.n, s.k, DType::kBF16, s.out);
      if (r == nullptr || r->best_us <= 0) continue;
      const double bytes = 2.0 * s.n * s.k + 2.0 * m * s.k + dtype_size(s.out) * m * s.n;
      const double gbps = bytes / (r->best_us * 1e-6) / 1e9;
      std::printf("%-10s %5lld %7lld %6lld %10.2f %10.2f %3d/%-2d %9.0f %7.1f%%\n", s.name,
                  static_cast<long long>(m), static_cast<long long>(s.n),
                  static_cast<long long>(s.k), r->heuristic_us, r->best_us, r->chosen,
                  r->n_candidates, gbps, 100.0 * gbps / copy);
    }
  }
}

// Split-K shapes (small M x N, long K) keep partial sums in cuBLASLt's workspace. Streams running
// GEMMs at once (two engines on one GPU, a trainer beside an engine) must not share it: each
// thread's results on its own stream, with the others running, equal its results alone.
// Opt-in benchmark: cuBLASLt, the skinny GEMM (3..8 rows) and the wgmma GEMM (sm_90) for
// bench-1b's projections at 3..64 rows, graph-timed (24 calls per graph, each on another copy of
// the weight, so they come from HBM).
TEST_F(CudaGemmTest, DISABLED_BenchSkinny) {
  RestoreSmallGemmKernels restore;
  const double copy = ops::cuda::bench_copy_gbps(size_t{1} << 30);
  struct Shape2 {
    const char* name;
    int64_t n, k;
  };
  const Shape2 shapes[] = {{"qkv fused", 2048, 1536},  {"o", 1536, 1536},
                           {"gate_up", 13824, 1536},   {"down", 1536, 6912},
                           {"q|k|v 1.7B", 4096, 2048}, {"gate_up 1.7B", 12288, 2048},
                           {"down 1.7B", 2048, 6144}};
  constexpr int kCopies = 8, kPerGraph = 24;
  const int sms = vela::cuda::device_properties().multiProcessorCount;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::printf("device copy %.0f GB/s (us per GEMM; GB/s and share of copy for the fastest)\n",
              copy);
  std::printf("%-13s %3s %8s %8s %8s %8s %7s %8s %7s\n", "gemm", "M", "cublas", "skinny",
              "cp.async", "tma", "GB/s", "of copy", "splits");
  // kind 0: cuBLASLt, 1: skinny, 2: wgmma with cp.async loads, 3: wgmma with TMA loads.
  constexpr int kKinds = 4;
  auto set_kind = [](int kind) {
    ops::cuda::gemm_skinny_set_enabled(kind == 1 ? 1 : 0);
#ifdef VELA_HAS_SM90A
    ops::cuda::gemm_wgmma_set_enabled(kind >= 2 ? 1 : 0);
    ops::cuda::gemm_wgmma_set_tma(kind == 3 ? 1 : 0);
#else
    (void)kind;
#endif
  };
  for (const Shape2& s : shapes) {
    std::vector<Tensor> ws;
    for (int i = 0; i < kCopies; ++i) {
      ws.push_back(Tensor::empty({s.n, s.k}, DType::kBF16, gpu()));
      cudaMemset(ws.back().data_ptr(), 0, ws.back().nbytes());
    }
    for (int64_t m : {4, 8, 16, 32, 64}) {
      Tensor a = test::random_cpu({m, s.k}, DType::kBF16, 5).to(gpu());
      Tensor c = Tensor::empty({m, s.n}, DType::kBF16, gpu());
      double us[kKinds] = {};
      for (int kind = 0; kind < kKinds; ++kind) {
        if (kind == 1 && m > ops::cuda::kSkinnyMaxRows) continue;
#ifndef VELA_HAS_SM90A
        if (kind >= 2) continue;
#endif
        set_kind(kind);
        cuda::StreamGuard sg(stream);
        for (int i = 0; i < kCopies; ++i) ops::gemm(a, ws[i], c, false, true);  // plans, scratch
        us[kind] = test::graph_us(stream, kPerGraph, 20,
                                  [&](int i) { ops::gemm(a, ws[i % kCopies], c, false, true); });
        ASSERT_GT(us[kind], 0.0) << "graph capture failed";
      }
      double best = us[0];
      for (double u : us)
        if (u > 0.0) best = std::min(best, u);
      const double bytes = 2.0 * s.n * s.k + 2.0 * m * (s.k + s.n);
      const double gbps = bytes / (best * 1e-6) / 1e9;
      int splits = 1;
#ifdef VELA_HAS_SM90A
      splits = ops::cuda::wgmma_gemm_splits(s.n, s.k, sms);
#endif
      (void)sms;
      std::printf("%-13s %3lld", s.name, static_cast<long long>(m));
      for (double u : us) std::printf(" %8.2f", u);
      std::printf(" %7.0f %7.1f%% %7d\n", gbps, 100.0 * gbps / copy, splits);
    }
  }
  cudaStreamSynchronize(stream);
  ops::cuda::gemm_release_stream(stream, 0);
  cudaStreamDestroy(stream);
}

// gate_up at 4..64 rows as the multi-row decode step runs it (gemm_silu_mul) against the GEMM +
// silu_mul kernel on cuBLASLt or the cp.async wgmma GEMM; each call on another of 8 weight copies,
// 24 calls per graph, us per call.
TEST_F(CudaGemmTest, DISABLED_BenchGemmSiluMul) {
#ifdef VELA_HAS_SM90A
  RestoreSmallGemmKernels restore;
  const double copy = ops::cuda::bench_copy_gbps(size_t{1} << 30);
  constexpr int kCopies = 8, kPerGraph = 24;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::printf("device copy %.0f GB/s; us per gate_up + SiLU*up\n%-14s %3s %8s %8s %8s\n", copy,
              "shape", "M", "cublas", "cp.async", "fused");
  for (auto [name, inter, k] :
       {std::tuple<const char*, int64_t, int64_t>{"bench-1b", 6912, 1536}, {"1.7B", 6144, 2048}}) {
    std::vector<Tensor> ws;
    for (int i = 0; i < kCopies; ++i) {
      ws.push_back(Tensor::empty({2 * inter, k}, DType::kBF16, gpu()));
      cudaMemset(ws.back().data_ptr(), 0, ws.back().nbytes());
    }
    for (int64_t m : {4, 16, 32, 64}) {
      Tensor a = test::random_cpu({m, k}, DType::kBF16, 5).to(gpu());
      Tensor h = Tensor::empty({m, 2 * inter}, DType::kBF16, gpu());
      Tensor act = Tensor::empty({m, inter}, DType::kBF16, gpu());
      // kind 0: cuBLASLt + silu_mul, 1: the cp.async wgmma GEMM + silu_mul, 2: gemm_silu_mul.
      double us[3] = {};
      for (int kind = 0; kind < 3; ++kind) {
        ops::cuda::gemm_wgmma_set_enabled(kind == 0 ? 0 : 1);
        ops::cuda::gemm_wgmma_set_tma(kind == 2 ? 1 : 0);
        auto call = [&](int i) {
          if (kind < 2) {
            ops::gemm(a, ws[i % kCopies], h, false, true);
            ops::silu_and_mul(h, act);
          } else {
            ASSERT_TRUE(ops::cuda::gemm_wgmma_silu_mul(a, ws[i % kCopies], act));
          }
        };
        cuda::StreamGuard sg(stream);
        for (int i = 0; i < kCopies; ++i) call(i);
        us[kind] = test::graph_us(stream, kPerGraph, 20, call);
        ASSERT_GT(us[kind], 0.0) << "graph capture failed";
      }
      std::printf("%-14s %3lld", name, static_cast<long long>(m));
      for (double u : us) std::printf(" %8.2f", u);
      std::printf("   (weights at copy: %.2f us)\n", 2.0 * 2 * inter * k / (copy * 1e3));
    }
  }
  cudaStreamSynchronize(stream);
  ops::cuda::gemm_release_stream(stream, 0);
  cudaStreamDestroy(stream);
#else
  GTEST_SKIP() << "built without sm_90a";
#endif
}

TEST_F(CudaGemmTest, StreamsRunningAtOnceEachHaveTheirOwnWorkspace) {
  constexpr int kStreams = 4, kIters = 24;
  constexpr int64_t m = 16, n = 64, k = 32768;
  std::vector<Tensor> a, b, alone;
  for (int i = 0; i < kStreams; ++i) {
    a.push_back(test::random_cpu({m, k}, DType::kF32, 10 + i).to(gpu()));
    b.push_back(test::random_cpu({k, n}, DType::kF32, 20 + i).to(gpu()));
    Tensor c = Tensor::zeros({m, n}, DType::kF32, gpu());
    ops::gemm(a.back(), b.back(), c);
    alone.push_back(c.to(Device::cpu()));
  }
  std::vector<double> worst(kStreams, 0.0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      cudaSetDevice(0);
      cudaStream_t s = nullptr;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      cuda::set_current_stream(s);
      {
        std::vector<Tensor> outs;
        for (int it = 0; it < kIters; ++it)
          outs.push_back(Tensor::zeros({m, n}, DType::kF32, gpu()));
        for (int it = 0; it < kIters; ++it) ops::gemm(a[i], b[i], outs[it]);
        for (const Tensor& o : outs) {
          Tensor h = o.to(Device::cpu());
          for (int64_t j = 0; j < m * n; ++j)
            worst[i] = std::max(
                worst[i],
                static_cast<double>(std::fabs(h.data<float>()[j] - alone[i].data<float>()[j])));
        }
      }
      cudaStreamSynchronize(s);
      ops::cuda::gemm_release_stream(s, 0);
      cuda::set_current_stream(nullptr);
      cudaStreamDestroy(s);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) EXPECT_LE(worst[i], 1e-3) << "stream " << i;
}

}  // namespace
}  // namespace vela
