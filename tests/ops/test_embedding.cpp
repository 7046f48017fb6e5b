// embedding: exact gathers for f32 / bf16 / f16 weights with i32 and i64 ids, same-dtype and f32
// output, strided weight rows, out-of-range ids and other InvalidArgument paths.
#include <gtest/gtest.h>

#include <vector>

#include "ops/embedding.h"
#include "ops/op_test_util.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

// w: the weight's values as doubles.
template <typename I>
void check_gather(const Tensor& weight, const std::vector<double>& w, const std::vector<I>& ids,
                  DType out_dt) {
  Tensor out = Tensor::empty({static_cast<int64_t>(ids.size()), weight.size(1)}, out_dt);
  ops::embedding(weight, Tensor::from_vector(ids), out);
  std::vector<double> got = to_doubles(out);
  const int64_t hidden = weight.size(1);
  std::vector<double> want;
  want.reserve(ids.size() * hidden);
  for (I id : ids) want.insert(want.end(), w.begin() + id * hidden, w.begin() + (id + 1) * hidden);
  EXPECT_EQ(got, want) << "embedding " << weight.str() << " -> " << out.str();
}

TEST(Embedding, GathersRows) {
  uint64_t seed = 1;
  for (DType dt : test::kFloatDTypes) {
    for (int64_t hidden : {1, 3, 127, 4096}) {
      Tensor w = random_tensor({50, hidden}, dt, seed++);
      std::vector<double> wd = to_doubles(w);
      for (int64_t n : {1, 7, 33}) {
        std::vector<int32_t> ids32(n);
        std::vector<int64_t> ids64(n);
        for (int64_t i = 0; i < n; ++i)
          ids64[i] = ids32[i] = static_cast<int32_t>((i * 13 + 49) % 50);
        for (DType out_dt : {dt, DType::kF32}) {
          check_gather(w, wd, ids32, out_dt);
          check_gather(w, wd, ids64, out_dt);
        }
      }
    }
  }
}

TEST(Embedding, StridedWeightRows) {
  Tensor w = test::strided_rows(20, 33, 5, DType::kBF16, 9);
  check_gather(w, to_doubles(w), std::vector<int32_t>{19, 0, 7, 7}, DType::kF32);
}

TEST(Embedding, InvalidArguments) {
  Tensor w = random_tensor({10, 4}, DType::kF32, 1);
  Tensor out = Tensor::empty({3, 4}, DType::kF32);
  EXPECT_THROW(ops::embedding(w, Tensor::from_vector(std::vector<int32_t>{0, 10, 1}), out),
               InvalidArgument);
  EXPECT_THROW(ops::embedding(w, Tensor::from_vector(std::vector<int64_t>{0, -1, 1}), out),
               InvalidArgument);
  EXPECT_THROW(ops::embedding(w, Tensor::from_vector(std::vector<float>{0, 1, 2}), out),
               InvalidArgument);
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 1, 2});
  Tensor out_bad = Tensor::empty({3, 5}, DType::kF32);
  EXPECT_THROW(ops::embedding(w, ids, out_bad), InvalidArgument);
  Tensor w16 = random_tensor({10, 4}, DType::kBF16, 2);
  Tensor out16 = Tensor::empty({3, 4}, DType::kF16);
  EXPECT_THROW(ops::embedding(w16, ids, out16), InvalidArgument);
  EXPECT_THROW(ops::embedding(random_tensor({40}, DType::kF32, 3), ids, out), InvalidArgument);
  Tensor ids2 = Tensor::from_vector(std::vector<int32_t>{0, 1, 2}, Shape{1, 3});
  EXPECT_THROW(ops::embedding(w, ids2, out), InvalidArgument);
  try {
    ops::embedding(w, Tensor::from_vector(std::vector<int32_t>{0, 10, 1}), out);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ids[1] = 10"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vela
