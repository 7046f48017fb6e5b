// ops::apply_token_bitmask on CUDA against its CPU twin: bit-exact over shapes from one row to
// B = 64 x Qwen's 151936 tokens, dense and row-strided logits, every row or a permuted subset,
// words all-zero / all-one / mixed, and a vocabulary that is not a multiple of 32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "cuda/cuda_test_util.h"
#include "ops/token_bitmask.h"

namespace vela {
namespace {

class CudaTokenBitmaskTest : public test::CudaTest {};

TEST_F(CudaTokenBitmaskTest, MatchesCpuTwinBitForBit) {
  struct Case {
    int64_t rows, vocab, masks;
    bool strided;
  };
  for (const Case& c : {Case{1, 100, 1, false}, Case{7, 1000, 5, true}, Case{33, 32001, 33, false},
                        Case{64, 151936, 64, false}, Case{64, 151936, 40, true}}) {
    std::mt19937 rng(static_cast<uint32_t>(c.rows * 131 + c.vocab));
    const int64_t cols = c.strided ? c.vocab + 7 : c.vocab, words = (c.vocab + 31) / 32;
    Tensor base = Tensor::empty({c.rows, cols}, DType::kF32);
    std::normal_distribution<float> d(0.f, 3.f);
    for (int64_t i = 0; i < c.rows * cols; ++i) base.data<float>()[i] = d(rng);
    Tensor mask = Tensor::empty({c.masks, words}, DType::kI32);
    for (int64_t i = 0; i < c.masks * words; ++i) {
      uint32_t r = rng(), bits = r % 4 == 0 ? 0u : r % 4 == 1 ? 0xFFFFFFFFu : rng();
      std::memcpy(mask.data<int32_t>() + i, &bits, 4);
    }
    std::vector<int32_t> ids(static_cast<size_t>(c.rows));
    for (int32_t i = 0; i < c.rows; ++i) ids[static_cast<size_t>(i)] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    ids.resize(static_cast<size_t>(c.masks));
    Tensor rows = Tensor::from_vector(ids, {c.masks});
    Tensor gbase = base.to(gpu());
    Tensor logits = c.strided ? base.slice(1, 0, c.vocab) : base;
    Tensor glogits = c.strided ? gbase.slice(1, 0, c.vocab) : gbase;
    ops::apply_token_bitmask(logits, mask, rows);
    Tensor gmask = mask.to(gpu()), grows = rows.to(gpu());
    ops::apply_token_bitmask(glogits, gmask, grows);
    Tensor back = gbase.to(Device::cpu());
    EXPECT_EQ(std::memcmp(back.data<float>(), base.data<float>(), base.nbytes()), 0)
        << c.rows << " x " << c.vocab << " masks " << c.masks;
  }
}

TEST_F(CudaTokenBitmaskTest, RejectsBadShapes) {
  Tensor logits = Tensor::zeros({2, 64}, DType::kF32, gpu());
  Tensor mask = Tensor::zeros({2, 3}, DType::kI32, gpu());  // 64 tokens need 2 words
  Tensor rows = Tensor::zeros({2}, DType::kI32, gpu());
  EXPECT_THROW(ops::apply_token_bitmask(logits, mask, rows), InvalidArgument);
  Tensor cpu_mask = Tensor::zeros({2, 2}, DType::kI32);
  EXPECT_THROW(ops::apply_token_bitmask(logits, cpu_mask, rows), InvalidArgument);
}

}  // namespace
}  // namespace vela
