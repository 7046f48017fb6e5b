// argmax / topk against a stable-sort reference: odd shapes, f32 / bf16 / f16 (bf16 rows are full
// of ties), explicit ties to the lower index, NaN ranking first, and the InvalidArgument paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/op_test_util.h"
#include "ops/topk.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

// Column order of one row: larger first, NaN above everything, ties by lower index.
std::vector<int32_t> ranking(const double* row, int64_t n) {
  std::vector<int32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    bool an = std::isnan(row[a]), bn = std::isnan(row[b]);
    if (an != bn) return an;
    return !an && row[a] > row[b];
  });
  return idx;
}

void check_row_ops(const Tensor& x, const std::vector<int64_t>& ks) {
  const int64_t rows = x.size(0), cols = x.size(1);
  std::vector<double> v = to_doubles(x);
  Tensor am = Tensor::empty({rows}, DType::kI32);
  ops::argmax(x, am);
  std::vector<int32_t> got_am = am.to_vector<int32_t>();
  std::vector<std::vector<int32_t>> order(rows);
  for (int64_t r = 0; r < rows; ++r) order[r] = ranking(v.data() + r * cols, cols);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(got_am[r], order[r][0]) << "argmax row " << r << " of " << x.str();
  for (int64_t k : ks) {
    if (k > cols) continue;
    Tensor values = Tensor::empty({rows, k}, DType::kF32);
    Tensor indices = Tensor::empty({rows, k}, DType::kI32);
    ops::topk(x, k, values, indices);
    std::vector<float> gv = values.to_vector<float>();
    std::vector<int32_t> gi = indices.to_vector<int32_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<int32_t>& want = order[r];
      for (int64_t j = 0; j < k; ++j) {
        ASSERT_EQ(gi[r * k + j], want[j])
            << "topk k=" << k << " row " << r << " rank " << j << " of " << x.str();
        double wv = v[r * cols + want[j]];
        if (std::isnan(wv)) {
          EXPECT_TRUE(std::isnan(gv[r * k + j]));
        } else {
          EXPECT_EQ(gv[r * k + j], wv);
        }
      }
    }
  }
}

TEST(TopK, MatchesStableSort) {
  uint64_t seed = 1;
  for (DType dt : test::kFloatDTypes) {
    for (int64_t rows : {1, 7, 33}) {
      for (int64_t cols : {1, 3, 127, 4096}) {
        check_row_ops(random_tensor({rows, cols}, dt, seed++), {1, 5, 64, cols});
      }
    }
  }
}

TEST(TopK, TiesGoToTheLowerIndex) {
  Tensor x =
      Tensor::from_vector(std::vector<float>{1, 3, 3, 2, 3, -1, 2, 2, 2, 2, 0, 0}, Shape{2, 6});
  Tensor values = Tensor::empty({2, 4}, DType::kF32), indices = Tensor::empty({2, 4}, DType::kI32);
  ops::topk(x, 4, values, indices);
  EXPECT_EQ(indices.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 4, 3, 0, 1, 2, 3}));
  EXPECT_EQ(values.to_vector<float>(), (std::vector<float>{3, 3, 3, 2, 2, 2, 2, 2}));
  Tensor am = Tensor::empty({2}, DType::kI32);
  ops::argmax(x, am);
  EXPECT_EQ(am.to_vector<int32_t>(), (std::vector<int32_t>{1, 0}));
  // Constant bf16 row.
  Tensor c = Tensor::zeros({1, 300}, DType::kBF16);
  check_row_ops(c, {1, 7, 300});
}

TEST(TopK, NanRanksFirst) {
  Tensor x =
      Tensor::from_vector(std::vector<float>{1, NAN, 5, NAN, -INFINITY, INFINITY}, Shape{1, 6});
  check_row_ops(x, {1, 3, 6});
  Tensor am = Tensor::empty({1}, DType::kI32);
  ops::argmax(x, am);
  EXPECT_EQ(am.item<int32_t>(), 1);
}

TEST(TopK, StridedRows) { check_row_ops(test::strided_rows(5, 40, 9, DType::kF16, 3), {1, 8}); }

TEST(TopK, InvalidArguments) {
  Tensor x = random_tensor({3, 10}, DType::kF32, 1);
  Tensor v = Tensor::empty({3, 4}, DType::kF32), i = Tensor::empty({3, 4}, DType::kI32);
  EXPECT_THROW(ops::topk(x, 0, v, i), InvalidArgument);
  EXPECT_THROW(ops::topk(x, 11, v, i), InvalidArgument);
  EXPECT_THROW(ops::topk(x, 5, v, i), InvalidArgument);  // shapes say k = 4
  Tensor v16 = Tensor::empty({3, 4}, DType::kBF16);
  EXPECT_THROW(ops::topk(x, 4, v16, i), InvalidArgument);
  Tensor i64 = Tensor::empty({3, 4}, DType::kI64);
  EXPECT_THROW(ops::topk(x, 4, v, i64), InvalidArgument);
  Tensor out = Tensor::empty({3}, DType::kI32);
  EXPECT_THROW(ops::argmax(random_tensor({10}, DType::kF32, 2), out), InvalidArgument);
  Tensor out_bad = Tensor::empty({4}, DType::kI32);
  EXPECT_THROW(ops::argmax(x, out_bad), InvalidArgument);
  Tensor out_i64 = Tensor::empty({3}, DType::kI64);
  EXPECT_THROW(ops::argmax(x, out_i64), InvalidArgument);
}

}  // namespace
}  // namespace vela
