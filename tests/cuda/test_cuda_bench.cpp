// The kernel benchmarks of ops/cuda/bench_cuda.h as opt-in tests (run with
// --gtest_also_run_disabled_tests --gtest_filter='*Bench*'): each prints its rate and checks the
// targets on an H200 (RMSNorm >= 80% of the device copy bandwidth, bf16 GEMM >= 640 TFLOP/s).
#include <gtest/gtest.h>

#include <cstdio>

#include "cuda/cuda_test_util.h"
#include "ops/cuda/bench_cuda.h"

namespace vela {
namespace {

class CudaBench : public test::CudaTest {};

TEST_F(CudaBench, DISABLED_CopyAndRmsNorm) {
  const double copy = ops::cuda::bench_copy_gbps(size_t{4} << 30);
  std::printf("copy d2d 4 GiB: %.0f GB/s (read + write)\n", copy);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (int64_t hidden : {4096, 8192, 1024, 128}) {
      const int64_t rows = (int64_t{4} << 30) / (hidden * static_cast<int64_t>(dtype_size(dt)));
      const double gbps = ops::cuda::bench_rms_norm_gbps(rows, hidden, dt);
      std::printf("rms_norm %s [%lld, %lld]: %.0f GB/s = %.1f%% of copy\n", dtype_name(dt),
                  static_cast<long long>(rows), static_cast<long long>(hidden), gbps,
                  100.0 * gbps / copy);
      if (hidden == 4096) {
        EXPECT_GE(gbps, 0.8 * copy) << dtype_name(dt);
      }
    }
  }
}

TEST_F(CudaBench, DISABLED_Gemm) {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int n : {8192, 4096}) {
      const double tflops = ops::cuda::bench_gemm_tflops(n, n, n, dt);
      std::printf("gemm %s %d^3: %.1f TFLOP/s\n", dtype_name(dt), n, tflops);
      if (dt == DType::kBF16 && n == 8192) {
        EXPECT_GE(tflops, 640.0);
      }
    }
  }
  const double decode = ops::cuda::bench_gemm_tflops(16, 4096, 4096, DType::kBF16);
  std::printf("gemm bf16 16x4096x4096 (decode-like): %.2f TFLOP/s\n", decode);
}

}  // namespace
}  // namespace vela
