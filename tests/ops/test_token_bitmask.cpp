// ops::apply_token_bitmask on the CPU: masked tokens become -inf, allowed ones keep their logits
// bit for bit, only the listed rows change, strided rows work, and bad shapes are rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "ops/token_bitmask.h"

namespace vela {
namespace {

TEST(TokenBitmask, MasksListedRowsOnly) {
  const int64_t rows = 5, vocab = 70, cols = 75, words = 3;  // 70 tokens: the last word is partial
  Tensor base = Tensor::empty({rows, cols}, DType::kF32);
  std::mt19937 rng(3);
  for (int64_t i = 0; i < rows * cols; ++i)
    base.data<float>()[i] = static_cast<float>(rng() % 1000) - 500.f;
  Tensor orig = base.clone();
  Tensor logits = base.slice(1, 0, vocab);
  Tensor mask = Tensor::empty({2, words}, DType::kI32);
  std::vector<uint32_t> bits(6);
  for (auto& b : bits) b = rng();
  bits[1] = 0xFFFFFFFFu;
  bits[3] = 0;
  std::memcpy(mask.data<int32_t>(), bits.data(), 24);
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{3, 1}, {2});
  ops::apply_token_bitmask(logits, mask, ids);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float before = orig.data<float>()[r * cols + c],
                  after = base.data<float>()[r * cols + c];
      int k = r == 3 ? 0 : r == 1 ? 1 : -1;
      bool allowed =
          k < 0 || c >= vocab || ((bits[static_cast<size_t>(k * 3 + c / 32)] >> (c % 32)) & 1u);
      if (allowed)
        EXPECT_EQ(after, before) << r << "," << c;
      else
        EXPECT_TRUE(std::isinf(after) && after < 0) << r << "," << c;
    }
  }
}

TEST(TokenBitmask, RejectsBadInput) {
  Tensor logits = Tensor::zeros({2, 64}, DType::kF32);
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{0, 1}, {2});
  EXPECT_THROW(ops::apply_token_bitmask(logits, Tensor::zeros({2, 3}, DType::kI32), ids),
               InvalidArgument);
  EXPECT_THROW(ops::apply_token_bitmask(logits, Tensor::zeros({2, 2}, DType::kF32), ids),
               InvalidArgument);
  Tensor bad_ids = Tensor::from_vector(std::vector<int32_t>{0, 5}, {2});
  EXPECT_THROW(ops::apply_token_bitmask(logits, Tensor::zeros({2, 2}, DType::kI32), bad_ids),
               InvalidArgument);
}

}  // namespace
}  // namespace vela
