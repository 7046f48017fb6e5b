// cross_entropy against a double reference with torch semantics: odd shapes, f32 / bf16 / f16
// logits, ignore_index rows (loss 0), label smoothing, and the InvalidArgument paths (including a
// target outside the vocabulary).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/cross_entropy.h"
#include "ops/op_test_util.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

std::vector<double> ce_ref(const std::vector<double>& x, const std::vector<int32_t>& t,
                           int64_t vocab, int32_t ignore, double eps) {
  std::vector<double> out(t.size());
  for (size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore) continue;
    const double* row = x.data() + r * vocab;
    double m = -INFINITY, s = 0.0, mean_neg_logp = 0.0;
    for (int64_t i = 0; i < vocab; ++i) m = std::max(m, row[i]);
    for (int64_t i = 0; i < vocab; ++i) s += std::exp(row[i] - m);
    double lse = m + std::log(s);
    for (int64_t i = 0; i < vocab; ++i) mean_neg_logp += (lse - row[i]) / vocab;
    out[r] = (1.0 - eps) * (lse - row[t[r]]) + eps * mean_neg_logp;
  }
  return out;
}

TEST(CrossEntropy, MatchesReference) {
  uint64_t seed = 1;
  for (DType dt : test::kFloatDTypes) {
    for (int64_t rows : {1, 7, 33}) {
      for (int64_t vocab : {1, 3, 127, 4096}) {
        for (float eps : {0.0f, 0.1f}) {
          Tensor logits = random_tensor({rows, vocab}, dt, seed++, -8.0f, 8.0f);
          std::vector<int32_t> t(rows);
          for (int64_t r = 0; r < rows; ++r)
            t[r] = r % 5 == 3 ? -100 : static_cast<int32_t>((r * 31 + 7) % vocab);
          Tensor losses = Tensor::empty({rows}, DType::kF32);
          ops::cross_entropy(logits, Tensor::from_vector(t), losses, -100, eps);
          std::vector<double> got = to_doubles(losses);
          std::vector<double> want = ce_ref(to_doubles(logits), t, vocab, -100, eps);
          test::expect_close(got, want, 2e-5, 2e-6,
                             "cross_entropy " + logits.str() + " eps " + std::to_string(eps));
          for (int64_t r = 0; r < rows; ++r) {
            if (t[r] == -100) {
              EXPECT_EQ(got[r], 0.0) << "ignored row " << r;
            }
          }
        }
      }
    }
  }
}

TEST(CrossEntropy, CustomIgnoreIndexLargeLogitsStridedRows) {
  Tensor logits = test::strided_rows(4, 50, 6, DType::kF32, 9);
  for (int64_t i = 0; i < 50; ++i) test::set_f32(logits, i, 500.0f + i);  // row 0 (contiguous)
  std::vector<int32_t> t = {3, 5, 0, 49};
  Tensor losses = Tensor::empty({4}, DType::kF32);
  ops::cross_entropy(logits, Tensor::from_vector(t), losses, 5, 0.2f);
  test::expect_close(to_doubles(losses), ce_ref(to_doubles(logits), t, 50, 5, 0.2), 2e-5, 2e-6,
                     "cross_entropy ignore_index 5");
  EXPECT_EQ(losses.to_vector<float>()[1], 0.0f);
}

TEST(CrossEntropy, InvalidArguments) {
  Tensor logits = random_tensor({3, 10}, DType::kBF16, 1);
  Tensor losses = Tensor::empty({3}, DType::kF32);
  auto targets = [](std::vector<int32_t> v) { return Tensor::from_vector(v); };
  EXPECT_THROW(ops::cross_entropy(logits, targets({0, 10, 1}), losses), InvalidArgument);
  EXPECT_THROW(ops::cross_entropy(logits, targets({0, -1, 1}), losses), InvalidArgument);
  EXPECT_NO_THROW(ops::cross_entropy(logits, targets({0, -100, 1}), losses));
  EXPECT_THROW(ops::cross_entropy(logits, targets({0, 1}), losses), InvalidArgument);
  EXPECT_THROW(
      ops::cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{0, 1, 2}), losses),
      InvalidArgument);
  Tensor losses16 = Tensor::empty({3}, DType::kBF16);
  EXPECT_THROW(ops::cross_entropy(logits, targets({0, 1, 2}), losses16), InvalidArgument);
  EXPECT_THROW(ops::cross_entropy(logits, targets({0, 1, 2}), losses, -100, 1.5f), InvalidArgument);
  EXPECT_THROW(ops::cross_entropy(random_tensor({30}, DType::kF32, 2), targets({0, 1, 2}), losses),
               InvalidArgument);
}

}  // namespace
}  // namespace vela
