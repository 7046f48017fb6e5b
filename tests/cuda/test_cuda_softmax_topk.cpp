// CUDA softmax / log_softmax, cross_entropy, argmax and topk against their CPU twins: odd and
// vocabulary-sized rows, f32 or x-dtype outputs, -inf entries, ignore_index and label smoothing,
// ties (bf16 rows are full of them) resolved to the lower index, k from 1 to 1024.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cuda/cuda_test_util.h"
#include "ops/cross_entropy.h"
#include "ops/softmax.h"
#include "ops/topk.h"

namespace vela {
namespace {

using test::CudaTest;

class CudaSoftmaxTest : public CudaTest {};

const std::pair<int64_t, int64_t> kRowShapes[] = {
    {1, 1}, {3, 127}, {4, 4096}, {2, 151936}, {65, 33}, {1, 32000},
};

TEST_F(CudaSoftmaxTest, SoftmaxAndLogSoftmaxMatchCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (DType out_dt : {dt, DType::kF32}) {
      for (auto [rows, cols] : kRowShapes) {
        SCOPED_TRACE(test::label(dt, {rows, cols}) + " out " + dtype_name(out_dt));
        Tensor x = test::random_cpu({rows, cols}, dt, 1, -8.0, 8.0);
        if (cols > 2) test::set_value(x, 1, -INFINITY);
        Tensor dx = x.to(gpu());
        Tensor want = Tensor::empty({rows, cols}, out_dt);
        Tensor got = Tensor::empty({rows, cols}, out_dt, gpu());
        test::Tol tol = test::tol_for(out_dt);
        ops::softmax(x, want);
        ops::softmax(dx, got);
        test::expect_close(got, want, {1e-6 + tol.atol * 1e-3, tol.rtol}, "softmax");
        ops::log_softmax(x, want);
        ops::log_softmax(dx, got);
        test::expect_close(got, want, {tol.atol * 2, tol.rtol}, "log_softmax");
      }
    }
  }
}

TEST_F(CudaSoftmaxTest, StridedRows) {
  Tensor wide = test::random_cpu({5, 1000 + 24}, DType::kBF16, 3);
  Tensor x = wide.slice(1, 0, 1000), dx = wide.to(gpu()).slice(1, 0, 1000);
  Tensor want = Tensor::empty({5, 1000}, DType::kF32);
  Tensor got = Tensor::empty({5, 1000}, DType::kF32, gpu());
  ops::softmax(x, want);
  ops::softmax(dx, got);
  test::expect_close(got, want, {1e-6, 1e-5}, "softmax strided");
}

TEST_F(CudaSoftmaxTest, CrossEntropyMatchesCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (float smoothing : {0.0f, 0.1f}) {
      for (auto [rows, vocab] : kRowShapes) {
        SCOPED_TRACE(test::label(dt, {rows, vocab}) + " smoothing " + std::to_string(smoothing));
        Tensor logits = test::random_cpu({rows, vocab}, dt, 4, -10.0, 10.0);
        Tensor targets = test::random_ints({rows}, DType::kI32, 5, 0, vocab);
        if (rows > 2) test::set_value(targets, 1, -100);  // ignored
        Tensor want = Tensor::empty({rows}, DType::kF32);
        Tensor got = Tensor::empty({rows}, DType::kF32, gpu());
        ops::cross_entropy(logits, targets, want, -100, smoothing);
        ops::cross_entropy(logits.to(gpu()), targets.to(gpu()), got, -100, smoothing);
        test::expect_close(got, want, {2e-5, 2e-5}, "cross_entropy");
      }
    }
  }
}

class CudaTopkTest : public CudaTest {};

TEST_F(CudaTopkTest, ArgmaxMatchesCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (auto [rows, cols] : kRowShapes) {
      SCOPED_TRACE(test::label(dt, {rows, cols}));
      // Few distinct values: many ties, which must go to the lower index.
      Tensor x = test::random_ints({rows, cols}, DType::kI32, 6, -20, 20);
      Tensor xf = Tensor::empty({rows, cols}, dt);
      std::vector<double> v = test::to_doubles(x);
      for (int64_t i = 0; i < xf.numel(); ++i) test::set_value(xf, i, v[i] / 4.0);
      Tensor want = Tensor::empty({rows}, DType::kI32);
      Tensor got = Tensor::empty({rows}, DType::kI32, gpu());
      ops::argmax(xf, want);
      ops::argmax(xf.to(gpu()), got);
      test::expect_equal(got, want, "argmax ties");
      Tensor r = test::random_cpu({rows, cols}, dt, 7);
      ops::argmax(r, want);
      ops::argmax(r.to(gpu()), got);
      test::expect_equal(got, want, "argmax random");
    }
  }
}

TEST_F(CudaTopkTest, ArgmaxNanAndInfinities) {
  Tensor x = test::random_cpu({3, 50}, DType::kF32, 8);
  test::set_value(x, 7, std::numeric_limits<double>::quiet_NaN());       // row 0: NaN wins
  test::set_value(x, 50 + 9, INFINITY);                                  // row 1: +inf wins
  for (int64_t i = 100; i < 150; ++i) test::set_value(x, i, -INFINITY);  // row 2: all -inf -> 0
  Tensor want = Tensor::empty({3}, DType::kI32), got = Tensor::empty({3}, DType::kI32, gpu());
  ops::argmax(x, want);
  ops::argmax(x.to(gpu()), got);
  test::expect_equal(got, want, "argmax special values");
  EXPECT_EQ(got.to_vector<int32_t>(), (std::vector<int32_t>{7, 9, 0}));
}

TEST_F(CudaTopkTest, TopkMatchesCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (auto [rows, cols] : kRowShapes) {
      for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{50}, int64_t{1024}, cols}) {
        if (k > cols || k > 4096) continue;
        SCOPED_TRACE(test::label(dt, {rows, cols}) + " k " + std::to_string(k));
        Tensor x = test::random_cpu({rows, cols}, dt, 9 + k);
        Tensor want_v = Tensor::empty({rows, k}, DType::kF32);
        Tensor want_i = Tensor::empty({rows, k}, DType::kI32);
        Tensor got_v = Tensor::empty({rows, k}, DType::kF32, gpu());
        Tensor got_i = Tensor::empty({rows, k}, DType::kI32, gpu());
        ops::topk(x, k, want_v, want_i);
        ops::topk(x.to(gpu()), k, got_v, got_i);
        test::expect_equal(got_v, want_v, "topk values");
        test::expect_equal(got_i, want_i, "topk indices");
      }
    }
  }
}

TEST_F(CudaTopkTest, TopkTiesZerosAndNan) {
  // Integers / 2 in bf16: heavy ties; plus -0.0 / +0.0 (equal) and a NaN (ranks first).
  const int64_t rows = 4, cols = 3000, k = 700;
  Tensor x = Tensor::empty({rows, cols}, DType::kBF16);
  std::vector<double> v = test::to_doubles(test::random_ints({rows, cols}, DType::kI32, 10, -9, 9));
  for (int64_t i = 0; i < x.numel(); ++i) test::set_value(x, i, v[i] / 2.0);
  test::set_value(x, 5, -0.0);
  test::set_value(x, cols + 11, std::numeric_limits<double>::quiet_NaN());
  Tensor want_v = Tensor::empty({rows, k}, DType::kF32),
         want_i = Tensor::empty({rows, k}, DType::kI32);
  Tensor got_v = Tensor::empty({rows, k}, DType::kF32, gpu());
  Tensor got_i = Tensor::empty({rows, k}, DType::kI32, gpu());
  ops::topk(x, k, want_v, want_i);
  ops::topk(x.to(gpu()), k, got_v, got_i);
  test::expect_equal(got_i, want_i, "topk tie indices");
  test::expect_equal(got_v, want_v, "topk tie values");
}

}  // namespace
}  // namespace vela
