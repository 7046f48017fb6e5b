// CUDA rms_norm / add_rms_norm, rotary and embedding against their CPU twins: hidden sizes that
// hit the warp-per-row, block-per-row and fallback kernels, w in f32 or x's dtype, strided rows,
// unaligned views, in-place use; rotary with partial rotary_dim and strided heads; embedding with
// i32 / i64 ids and f32 output.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "ops/embedding.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"

namespace vela {
namespace {

using test::CudaTest;

class CudaNormTest : public CudaTest {};

// (rows, hidden): warp path (hidden <= 32 * 4 vectors), block path, and the two-pass fallback
// (hidden > 1024 * 4 vectors, or not a multiple of the vector width).
const std::pair<int64_t, int64_t> kNormShapes[] = {
    {1, 1},    {3, 127},  {1, 8},     {37, 128},   {5, 4096}, {2, 8192}, {3, 5120},
    {3, 4104}, {4, 1000}, {2, 40000}, {1, 131072}, {300, 64}, {5, 384},
};

TEST_F(CudaNormTest, RmsNormMatchesCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (DType wdt : {dt, DType::kF32}) {
      for (auto [rows, hidden] : kNormShapes) {
        SCOPED_TRACE(test::label(dt, {rows, hidden}) + " w " + dtype_name(wdt));
        Tensor x = test::random_cpu({rows, hidden}, dt, 1, -3.0, 3.0);
        Tensor w = test::random_cpu({hidden}, wdt, 2, 0.5, 1.5);
        Tensor want = Tensor::empty({rows, hidden}, dt);
        Tensor got = Tensor::empty({rows, hidden}, dt, gpu());
        ops::rms_norm(x, w, 1e-6f, want);
        ops::rms_norm(x.to(gpu()), w.to(gpu()), 1e-6f, got);
        test::expect_close(got, want, test::tol_for(dt), "rms_norm");
      }
    }
  }
}

TEST_F(CudaNormTest, AddRmsNormMatchesCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (auto [rows, hidden] : kNormShapes) {
      SCOPED_TRACE(test::label(dt, {rows, hidden}));
      Tensor x = test::random_cpu({rows, hidden}, dt, 3);
      Tensor res = test::random_cpu({rows, hidden}, dt, 4, -2.0, 2.0);
      Tensor w = test::random_cpu({hidden}, dt, 5, 0.5, 1.5);
      Tensor dres = res.to(gpu());
      Tensor want = Tensor::empty({rows, hidden}, dt);
      Tensor got = Tensor::empty({rows, hidden}, dt, gpu());
      ops::add_rms_norm(x, res, w, 1e-5f, want);
      ops::add_rms_norm(x.to(gpu()), dres, w.to(gpu()), 1e-5f, got);
      test::expect_close(dres, res, test::tol_for(dt), "residual");
      test::expect_close(got, want, test::tol_for(dt), "out");
    }
  }
}

TEST_F(CudaNormTest, StridedUnalignedAndInPlace) {
  for (DType dt : test::kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    // Rows of a wider matrix (row stride 4096 + 8, aligned) and (4096 + 1, unaligned).
    for (int64_t pad : {8, 1}) {
      Tensor wide = test::random_cpu({6, 4096 + pad}, dt, 6);
      Tensor x = wide.slice(1, 0, 4096), dx = wide.to(gpu()).slice(1, 0, 4096);
      Tensor w = test::random_cpu({4096}, dt, 7);
      Tensor want = Tensor::empty({6, 4096}, dt), got = Tensor::empty({6, 4096}, dt, gpu());
      ops::rms_norm(x, w, 1e-6f, want);
      ops::rms_norm(dx, w.to(gpu()), 1e-6f, got);
      test::expect_close(got, want, test::tol_for(dt), "strided rows pad " + std::to_string(pad));
    }
    // Leading dims [2, 3, 256], in place (out aliases x).
    Tensor x = test::random_cpu({2, 3, 256}, dt, 8);
    Tensor w = test::random_cpu({256}, dt, 9);
    Tensor want = Tensor::empty({2, 3, 256}, dt);
    ops::rms_norm(x, w, 1e-6f, want);
    Tensor dx = x.to(gpu());
    ops::rms_norm(dx, w.to(gpu()), 1e-6f, dx);
    test::expect_close(dx, want, test::tol_for(dt), "in place 3-D");
  }
}

class CudaRotaryTest : public CudaTest {};

TEST_F(CudaRotaryTest, MatchesCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (int64_t head_dim : {64, 128, 6}) {
      for (int64_t rotary_dim : {head_dim, head_dim / 2 - (head_dim / 2) % 2}) {
        if (rotary_dim < 2) continue;
        for (int64_t n_tokens : {1, 3, 17}) {
          const int64_t n_heads = 4;
          SCOPED_TRACE(test::label(dt, {n_tokens, n_heads, head_dim}) + " rotary_dim " +
                       std::to_string(rotary_dim));
          ops::RopeConfig cfg;
          cfg.rotary_dim = rotary_dim;
          cfg.theta = 10000.0;
          cfg.max_positions = 64;
          Tensor table = ops::make_rope_table(cfg, 64);
          Tensor pos = test::random_ints({n_tokens}, DType::kI32, 10 + n_tokens, 0, 64);
          Tensor x = test::random_cpu({n_tokens, n_heads, head_dim}, dt, 11);
          Tensor dx = x.to(gpu());
          ops::rotary(x, pos, table);
          ops::rotary(dx, pos.to(gpu()), table.to(gpu()));
          test::expect_close(dx, x, test::tol_for(dt), "rotary");
        }
      }
    }
  }
}

TEST_F(CudaRotaryTest, HeadsOfAFusedProjection) {
  // q and k as head ranges of one [n_tokens, 8 + 2 + 2, head_dim] qkv buffer.
  const int64_t n_tokens = 5, head_dim = 128;
  for (DType dt : test::kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    ops::RopeConfig cfg;
    cfg.rotary_dim = head_dim;
    cfg.max_positions = 32;
    Tensor table = ops::make_rope_table(cfg, 32);
    Tensor pos = test::random_ints({n_tokens}, DType::kI32, 5, 0, 32);
    Tensor qkv = test::random_cpu({n_tokens, 12, head_dim}, dt, 6);
    Tensor dqkv = qkv.to(gpu());
    Tensor dtable = table.to(gpu()), dpos = pos.to(gpu());
    for (auto [h0, h1] : {std::pair<int64_t, int64_t>{0, 8}, {8, 10}}) {
      Tensor q = qkv.slice(1, h0, h1), dq = dqkv.slice(1, h0, h1);
      ops::rotary(q, pos, table);
      ops::rotary(dq, dpos, dtable);
    }
    test::expect_close(dqkv, qkv, test::tol_for(dt), "rotary on qkv views");
  }
}

class CudaEmbeddingTest : public CudaTest {};

TEST_F(CudaEmbeddingTest, MatchesCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (DType out_dt : {dt, DType::kF32}) {
      for (DType id_dt : {DType::kI32, DType::kI64}) {
        for (auto [vocab, hidden] :
             {std::pair<int64_t, int64_t>{1, 1}, {50, 3}, {1000, 4096}, {7, 127}}) {
          SCOPED_TRACE(test::label(dt, {vocab, hidden}) + " out " + dtype_name(out_dt) + " ids " +
                       dtype_name(id_dt));
          Tensor weight = test::random_cpu({vocab, hidden}, dt, 21);
          Tensor ids = test::random_ints({37}, id_dt, 22, 0, vocab);
          Tensor want = Tensor::empty({37, hidden}, out_dt);
          Tensor got = Tensor::empty({37, hidden}, out_dt, gpu());
          ops::embedding(weight, ids, want);
          ops::embedding(weight.to(gpu()), ids.to(gpu()), got);
          test::expect_equal(got, want, "embedding");
        }
      }
    }
  }
}

}  // namespace
}  // namespace vela
