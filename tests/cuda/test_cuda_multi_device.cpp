// Ops on a second GPU (skipped with fewer than two): every launcher must run on its tensors'
// device whatever the thread's current device is, with that device's allocator, stream and
// cuBLASLt handle; copies between devices go peer to peer.
#include <gtest/gtest.h>

#include "core/cuda/stream.h"
#include "cuda/cuda_test_util.h"
#include "ops/gemm.h"
#include "ops/rms_norm.h"
#include "ops/topk.h"

namespace vela {
namespace {

class CudaMultiDeviceTest : public test::CudaTest {
 protected:
  void SetUp() override {
    test::CudaTest::SetUp();
    if (IsSkipped()) return;
    if (cuda::device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  }
};

TEST_F(CudaMultiDeviceTest, OpsRunOnTheTensorsDevice) {
  const Device d1 = Device::cuda(1);
  ASSERT_EQ(cuda::current_device(), 0);
  const cuda::AllocatorStats s0 = cuda::allocator_stats(1);

  Tensor x = test::random_cpu({64, 4096}, DType::kBF16, 1);
  Tensor w = test::random_cpu({4096}, DType::kBF16, 2);
  Tensor want = Tensor::empty({64, 4096}, DType::kBF16);
  ops::rms_norm(x, w, 1e-6f, want);
  Tensor got = Tensor::empty({64, 4096}, DType::kBF16, d1);
  ops::rms_norm(x.to(d1), w.to(d1), 1e-6f, got);
  test::expect_close(got, want, test::tol_for(DType::kBF16), "rms_norm on cuda:1");

  Tensor a = test::random_cpu({96, 128}, DType::kBF16, 3),
         b = test::random_cpu({128, 80}, DType::kBF16, 4);
  Tensor c_want = Tensor::empty({96, 80}, DType::kF32);
  ops::gemm(a, b, c_want);
  Tensor c_got = Tensor::empty({96, 80}, DType::kF32, d1);
  ops::gemm(a.to(d1), b.to(d1), c_got);
  test::expect_close(c_got, c_want, {1e-4, 1e-5}, "gemm on cuda:1");

  Tensor v_want = Tensor::empty({64, 10}, DType::kF32),
         i_want = Tensor::empty({64, 10}, DType::kI32);
  Tensor v_got = Tensor::empty({64, 10}, DType::kF32, d1);
  Tensor i_got = Tensor::empty({64, 10}, DType::kI32, d1);
  ops::topk(x, 10, v_want, i_want);
  ops::topk(x.to(d1), 10, v_got, i_got);
  test::expect_equal(i_got, i_want, "topk on cuda:1");

  // Strided gather on device 1, then a peer copy to device 0.
  Tensor t1 = x.to(d1).transpose(0, 1).contiguous();
  test::expect_equal(t1.to(Device::cuda(0)), x.transpose(0, 1).contiguous(), "cuda:1 -> cuda:0");

  EXPECT_EQ(cuda::current_device(), 0);  // every guard restored the thread's device
  EXPECT_GT(cuda::allocator_stats(1).n_allocs, s0.n_allocs);
  cuda::synchronize(1);
}

}  // namespace
}  // namespace vela
