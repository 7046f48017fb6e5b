// ops::argmax_chunks (the sampler's argmax in 128-column pieces) and ops::gemm_argmax_chunks (the
// LM head writing them) on the CPU: every piece against a scalar scan, ties across and inside a
// chunk to the lower id, NaN as -inf, all -inf rows, a short last chunk, the row argmax from the
// pieces equal to argmax_lower_id, the fused op's logits equal to ops::gemm's, and bad shapes.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "engine/runtime/sampler.h"
#include "ops/cast.h"
#include "ops/fused_gemm.h"
#include "ops/gemm.h"
#include "ops/sampling.h"

namespace vela {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The piece of chunk j of row r by a plain scan (NaN as -inf, ties to the lower id).
uint64_t scan_chunk(const float* row, int64_t n, int64_t j) {
  uint64_t best = 0;
  for (int64_t i = j * ops::kArgmaxChunkCols; i < std::min(n, (j + 1) * ops::kArgmaxChunkCols);
       ++i) {
    const float v = row[i] != row[i] ? -kInf : row[i];
    best = std::max(best, ops::sample_rank(ops::sample_key(v), static_cast<int32_t>(i)));
  }
  return best;
}

int32_t argmax_from_pieces(const Tensor& chunk_max, int64_t r, int64_t n_chunks) {
  const auto* cm =
      reinterpret_cast<const uint64_t*>(chunk_max.data_ptr()) + r * chunk_max.stride(0);
  uint64_t best = 0;
  for (int64_t j = 0; j < n_chunks; ++j) best = std::max(best, cm[j]);
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(best));
}

// Rows with the awkward cases the greedy sampler has tests for.
Tensor awkward_logits(int64_t n_rows, int64_t vocab, uint32_t seed) {
  Tensor t = Tensor::empty({n_rows, vocab}, DType::kF32);
  float* x = t.data<float>();
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (int64_t i = 0; i < n_rows * vocab; ++i) x[i] = d(rng);
  for (int64_t i = 0; i < vocab; ++i) x[1 * vocab + i] = 0.25f;  // all tied: id 0
  x[2 * vocab + 127] = 50.0f;  // a tie across the first chunk boundary: 127
  x[2 * vocab + 128] = 50.0f;
  x[3 * vocab + 17] = std::numeric_limits<float>::quiet_NaN();  // NaN reads as -inf
  x[3 * vocab + 18] = kInf;
  for (int64_t i = 0; i < vocab; ++i) x[4 * vocab + i] = -kInf;  // all -inf: id 0
  x[5 * vocab + vocab - 1] = 60.0f;                              // the last (short) chunk
  x[6 * vocab + 9] = -0.0f;  // -0 and +0 share a key: the lower id
  x[6 * vocab + 5] = 0.0f;
  for (int64_t i = 0; i < vocab; ++i)
    if (i != 5 && i != 9) x[6 * vocab + i] = -1.0f;
  return t;
}

TEST(ArgmaxChunks, EveryPieceEqualsAScanAndTheirMaxIsTheArgmax) {
  for (int64_t vocab : {1L, 127L, 128L, 1000L, 100003L}) {
    const int64_t rows = vocab >= 129 ? 8 : 3;
    Tensor logits = Tensor::empty({rows, vocab}, DType::kF32);
    if (vocab >= 129) {
      logits = awkward_logits(rows, vocab, 5);
    } else {  // too narrow for the special rows: random ones
      std::mt19937 rng(1);
      std::normal_distribution<float> d;
      for (int64_t i = 0; i < rows * vocab; ++i) logits.data<float>()[i] = d(rng);
    }
    const int64_t chunks = ops::argmax_chunk_count(vocab);
    Tensor cm = Tensor::zeros({rows + 2, chunks + 3}, DType::kI64);  // larger than needed
    ops::argmax_chunks(logits, cm);
    const float* x = logits.data<float>();
    const auto* got = reinterpret_cast<const uint64_t*>(cm.data_ptr());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < chunks; ++j)
        ASSERT_EQ(got[r * cm.stride(0) + j], scan_chunk(x + r * vocab, vocab, j))
            << "vocab " << vocab << " row " << r << " chunk " << j;
      EXPECT_EQ(argmax_from_pieces(cm, r, chunks), argmax_lower_id(x + r * vocab, vocab))
          << "vocab " << vocab << " row " << r;
    }
    if (vocab >= 129) {
      EXPECT_EQ(argmax_from_pieces(cm, 1, chunks), 0);
      EXPECT_EQ(argmax_from_pieces(cm, 2, chunks), 127);
      EXPECT_EQ(argmax_from_pieces(cm, 3, chunks), 18);
      EXPECT_EQ(argmax_from_pieces(cm, 4, chunks), 0);
      EXPECT_EQ(argmax_from_pieces(cm, 5, chunks), vocab - 1);
      EXPECT_EQ(argmax_from_pieces(cm, 6, chunks), 5);
    }
  }
}

TEST(ArgmaxChunks, StridedRowsAndTheFusedLmHeadOp) {
  // Rows of a wider buffer (the engine slices its logits), then the LM head form on bf16 and f32.
  const int64_t vocab = 1000, k = 64, m = 5;
  Tensor wide = awkward_logits(m, vocab + 24, 9);
  Tensor logits = wide.slice(1, 0, vocab);
  Tensor cm = Tensor::zeros({m, ops::argmax_chunk_count(vocab)}, DType::kI64);
  ops::argmax_chunks(logits, cm);
  for (int64_t r = 0; r < m; ++r)
    EXPECT_EQ(argmax_from_pieces(cm, r, cm.size(1)),
              argmax_lower_id(wide.data<float>() + r * (vocab + 24), vocab));

  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Tensor a32 = Tensor::empty({m, k}, DType::kF32), w32 = Tensor::empty({vocab, k}, DType::kF32);
    for (int64_t i = 0; i < a32.numel(); ++i) a32.data<float>()[i] = d(rng);
    for (int64_t i = 0; i < w32.numel(); ++i) w32.data<float>()[i] = d(rng);
    Tensor a = ops::to_dtype(a32, dt), w = ops::to_dtype(w32, dt);
    Tensor want = Tensor::zeros({m, vocab}, DType::kF32),
           got = Tensor::zeros({m, vocab}, DType::kF32);
    ops::gemm(a, w, want, false, true);
    Tensor pieces = Tensor::zeros({m, ops::argmax_chunk_count(vocab)}, DType::kI64);
    ops::gemm_argmax_chunks(a, w, got, pieces);
    EXPECT_EQ(std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()), 0) << dtype_name(dt);
    for (int64_t r = 0; r < m; ++r)
      EXPECT_EQ(argmax_from_pieces(pieces, r, pieces.size(1)),
                argmax_lower_id(want.data<float>() + r * vocab, vocab))
          << dtype_name(dt) << " row " << r;
  }
}

TEST(ArgmaxChunks, RejectsBadShapes) {
  Tensor logits = Tensor::zeros({4, 300}, DType::kF32);
  Tensor small = Tensor::zeros({4, 2}, DType::kI64);  // 300 columns need 3 pieces a row
  EXPECT_THROW(ops::argmax_chunks(logits, small), InvalidArgument);
  Tensor few_rows = Tensor::zeros({3, 3}, DType::kI64);
  EXPECT_THROW(ops::argmax_chunks(logits, few_rows), InvalidArgument);
  Tensor wrong_dtype = Tensor::zeros({4, 3}, DType::kI32);
  EXPECT_THROW(ops::argmax_chunks(logits, wrong_dtype), InvalidArgument);
  Tensor ok = Tensor::zeros({4, 3}, DType::kI64);
  EXPECT_THROW(ops::argmax_chunks(Tensor::zeros({4, 300}, DType::kBF16), ok), InvalidArgument);
  Tensor a = Tensor::zeros({4, 16}, DType::kF32), w = Tensor::zeros({300, 16}, DType::kF32);
  Tensor wrong_logits = Tensor::zeros({4, 299}, DType::kF32);
  EXPECT_THROW(ops::gemm_argmax_chunks(a, w, wrong_logits, ok), InvalidArgument);
  EXPECT_THROW(ops::gemm_argmax_chunks(a, w, logits, small), InvalidArgument);
}

}  // namespace
}  // namespace vela
