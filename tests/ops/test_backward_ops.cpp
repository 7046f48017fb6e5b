// Backward ops against central finite differences on the CPU (f32; loss = sum(out * R) for a
// fixed random R, evaluated in double; h = 1e-2, |analytic - numeric| <= 2e-3 + 1e-2 * |numeric|
// unless stated), plus exact checks where the gradient is a plain sum and the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check_util.h"
#include "op_test_util.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/reduce.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"
#include "ops/swiglu.h"

namespace vela {
namespace {

using test::expect_grad_fd;
using test::random_tensor;
using test::weighted_sum;

std::vector<float> random_weights(int64_t n, uint64_t seed) {
  return random_tensor({n}, DType::kF32, seed).to_vector<float>();
}

TEST(RmsNormBackward, MatchesFiniteDifferences) {
  const int64_t rows = 5, hidden = 24;
  Tensor x = random_tensor({rows, hidden}, DType::kF32, 1);
  Tensor w = random_tensor({hidden}, DType::kF32, 2, 0.5f, 1.5f);
  const float eps = 1e-5f;
  std::vector<float> r = random_weights(rows * hidden, 3);
  auto loss = [&] {
    Tensor out = Tensor::empty({rows, hidden}, DType::kF32);
    ops::rms_norm(x, w, eps, out);
    return weighted_sum(out, r);
  };
  Tensor dout = Tensor::from_vector(r, {rows, hidden});
  Tensor dx = Tensor::empty({rows, hidden}, DType::kF32);
  Tensor dw = Tensor::zeros({hidden}, DType::kF32);
  ops::rms_norm_backward(x, w, eps, dout, dx, dw);
  expect_grad_fd(x, dx, loss, "rms_norm dx");
  expect_grad_fd(w, dw, loss, "rms_norm dw");
  // dw accumulates.
  std::vector<float> once = dw.to_vector<float>();
  ops::rms_norm_backward(x, w, eps, dout, dx, dw);
  std::vector<float> twice = dw.to_vector<float>();
  for (int64_t i = 0; i < hidden; ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
}

TEST(RmsNormBackward, FusedAddAccumulatesIntoResidualGrad) {
  const int64_t rows = 3, hidden = 16;
  Tensor x = random_tensor({rows, hidden}, DType::kF32, 4);
  Tensor w = random_tensor({hidden}, DType::kF32, 5, 0.5f, 1.5f);
  Tensor dout = random_tensor({rows, hidden}, DType::kF32, 6);
  Tensor dres = random_tensor({rows, hidden}, DType::kF32, 7);
  std::vector<float> before = dres.to_vector<float>();
  Tensor dx = Tensor::empty({rows, hidden}, DType::kF32);
  Tensor no_dw;
  ops::rms_norm_backward(x, w, 1e-6f, dout, dx, no_dw);
  ops::add_rms_norm_backward(x, w, 1e-6f, dout, dres, no_dw);
  std::vector<float> got = dres.to_vector<float>(), g = dx.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], before[i] + g[i], 1e-6);
  EXPECT_THROW(ops::add_rms_norm_backward(x, w, 1e-6f, dout, dout, no_dw), InvalidArgument);
}

TEST(RmsNormBackward, InPlaceOnDoutMatches) {
  const int64_t rows = 4, hidden = 8;
  Tensor x = random_tensor({rows, hidden}, DType::kF32, 8);
  Tensor w = random_tensor({hidden}, DType::kF32, 9);
  Tensor dout = random_tensor({rows, hidden}, DType::kF32, 10);
  Tensor dx = Tensor::empty({rows, hidden}, DType::kF32);
  Tensor dw1 = Tensor::zeros({hidden}, DType::kF32), dw2 = Tensor::zeros({hidden}, DType::kF32);
  ops::rms_norm_backward(x, w, 1e-6f, dout, dx, dw1);
  ops::rms_norm_backward(x, w, 1e-6f, dout, dout, dw2);  // dx aliases dout (QK-norm does this)
  EXPECT_EQ(dx.to_vector<float>(), dout.to_vector<float>());
  EXPECT_EQ(dw1.to_vector<float>(), dw2.to_vector<float>());
}

void check_rotary_backward(const ops::RopeConfig& cfg, int64_t head_dim, const char* what) {
  const int64_t n = 5, heads = 3;
  Tensor table = ops::make_rope_table(cfg, 64);
  Tensor positions = Tensor::from_vector(std::vector<int32_t>{0, 7, 3, 63, 20});
  Tensor x = random_tensor({n, heads, head_dim}, DType::kF32, 11);
  std::vector<float> r = random_weights(n * heads * head_dim, 12);
  auto loss = [&] {
    Tensor y = x.clone();
    ops::rotary(y, positions, table);
    return weighted_sum(y, r);
  };
  Tensor dx = Tensor::from_vector(r, {n, heads, head_dim});
  ops::rotary_backward(dx, positions, table);
  expect_grad_fd(x, dx, loss, what);
}

TEST(RotaryBackward, MatchesFiniteDifferencesForEveryScaling) {
  ops::RopeConfig cfg;
  cfg.rotary_dim = 16;
  cfg.max_positions = 64;
  check_rotary_backward(cfg, 16, "rotary none");
  cfg.scaling.type = ops::RopeScaling::Type::kLinear;
  cfg.scaling.factor = 2.0;
  check_rotary_backward(cfg, 16, "rotary linear");
  cfg.scaling.type = ops::RopeScaling::Type::kYarn;
  cfg.scaling.factor = 4.0;
  cfg.scaling.original_max_positions = 16;
  check_rotary_backward(cfg, 16, "rotary yarn (attention scaling != 1)");
  cfg.scaling.type = ops::RopeScaling::Type::kLlama3;
  cfg.scaling.factor = 8.0;
  check_rotary_backward(cfg, 16, "rotary llama3");
  cfg.scaling = ops::RopeScaling{};
  cfg.rotary_dim = 8;  // partial rotary: the last 8 features pass through
  check_rotary_backward(cfg, 16, "rotary partial");
}

TEST(RotaryBackward, RejectsPositionsOutsideTheTable) {
  ops::RopeConfig cfg;
  cfg.rotary_dim = 8;
  Tensor table = ops::make_rope_table(cfg, 4);
  Tensor dx = Tensor::zeros({1, 1, 8}, DType::kF32);
  Tensor pos = Tensor::from_vector(std::vector<int32_t>{4});
  EXPECT_THROW(ops::rotary_backward(dx, pos, table), InvalidArgument);
}

TEST(SiluMulBackward, MatchesFiniteDifferences) {
  const int64_t rows = 4, inter = 12;
  Tensor x = random_tensor({rows, 2 * inter}, DType::kF32, 13, -3.0f, 3.0f);
  std::vector<float> r = random_weights(rows * inter, 14);
  auto loss = [&] {
    Tensor out = Tensor::empty({rows, inter}, DType::kF32);
    ops::silu_and_mul(x, out);
    return weighted_sum(out, r);
  };
  Tensor dx = Tensor::empty({rows, 2 * inter}, DType::kF32);
  ops::silu_and_mul_backward(x, Tensor::from_vector(r, {rows, inter}), dx);
  expect_grad_fd(x, dx, loss, "silu_and_mul dx");
  EXPECT_THROW(ops::silu_and_mul_backward(x, Tensor::zeros({rows, inter + 1}, DType::kF32), dx),
               InvalidArgument);
}

TEST(EmbeddingBackward, ScatterAddsRepeatedIds) {
  const int64_t vocab = 7, hidden = 300;  // > one column block
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{3, 1, 3, 6, 3});
  Tensor dout = random_tensor({5, hidden}, DType::kF32, 15);
  Tensor dw = random_tensor({vocab, hidden}, DType::kF32, 16);
  std::vector<double> want = test::to_doubles(dw), d = test::to_doubles(dout);
  std::vector<int32_t> idv = ids.to_vector<int32_t>();
  for (int64_t t = 0; t < 5; ++t)
    for (int64_t c = 0; c < hidden; ++c) want[idv[t] * hidden + c] += d[t * hidden + c];
  ops::embedding_backward(ids, dout, dw);
  test::expect_close(test::to_doubles(dw), want, 1e-5, 1e-6, "embedding_backward");
  Tensor bad = Tensor::from_vector(std::vector<int32_t>{0, 1, 7, 2, 3});
  EXPECT_THROW(ops::embedding_backward(bad, dout, dw), InvalidArgument);
}

void check_attention_backward(int64_t heads, int64_t kv_heads, bool docs, const char* what) {
  const int64_t b = 2, t = 6, d = 8;
  Tensor q = random_tensor({b, t, heads, d}, DType::kF32, 17);
  Tensor k = random_tensor({b, t, kv_heads, d}, DType::kF32, 18);
  Tensor v = random_tensor({b, t, kv_heads, d}, DType::kF32, 19);
  Tensor doc_ids;
  if (docs)
    doc_ids = Tensor::from_vector(std::vector<int32_t>{0, 0, 1, 1, 1, 2, 5, 5, 5, 5, 9, 9}, {b, t});
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> r = random_weights(b * t * heads * d, 20);
  auto loss = [&] {
    Tensor out = Tensor::empty({b, t, heads, d}, DType::kF32);
    ops::causal_attention(q, k, v, doc_ids, scale, out);
    return weighted_sum(out, r);
  };
  Tensor out = Tensor::empty({b, t, heads, d}, DType::kF32);
  ops::causal_attention(q, k, v, doc_ids, scale, out);
  Tensor dq = Tensor::empty(q.shape(), DType::kF32), dk = Tensor::empty(k.shape(), DType::kF32),
         dv = Tensor::empty(v.shape(), DType::kF32);
  ops::causal_attention_backward(q, k, v, doc_ids, scale, out, Tensor::from_vector(r, q.shape()),
                                 dq, dk, dv);
  expect_grad_fd(q, dq, loss, std::string(what) + " dq");
  expect_grad_fd(k, dk, loss, std::string(what) + " dk");
  expect_grad_fd(v, dv, loss, std::string(what) + " dv");
}

TEST(CausalAttentionBackward, MatchesFiniteDifferences) {
  check_attention_backward(2, 2, false, "mha");
  check_attention_backward(4, 2, false, "gqa");
  check_attention_backward(4, 1, true, "mqa packed documents");
}

// The forward's optional log-sum-exp ([batch, n_heads, seq]) against log(sum exp(scale * q.k))
// over the visible keys in double, and the backward given that lse against the backward without.
TEST(CausalAttentionBackward, SavedLseMatchesDirectSumAndBackward) {
  const int64_t b = 2, t = 9, heads = 4, kv_heads = 2, d = 8, n_rep = heads / kv_heads;
  Tensor q = random_tensor({b, t, heads, d}, DType::kF32, 21, -2.0f, 2.0f);
  Tensor k = random_tensor({b, t, kv_heads, d}, DType::kF32, 22, -2.0f, 2.0f);
  Tensor v = random_tensor({b, t, kv_heads, d}, DType::kF32, 23);
  Tensor doc_ids = Tensor::from_vector(
      std::vector<int32_t>{0, 0, 0, 1, 2, 2, 2, 2, 3, 4, 4, 4, 4, 4, 4, 5, 5, 5}, {b, t});
  const int32_t* docs = doc_ids.data<int32_t>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Tensor out = Tensor::empty(q.shape(), DType::kF32), out2 = Tensor::empty(q.shape(), DType::kF32);
  Tensor lse = Tensor::empty({b, heads, t}, DType::kF32);
  ops::causal_attention(q, k, v, doc_ids, scale, out, lse);
  ops::causal_attention(q, k, v, doc_ids, scale, out2);
  test::expect_close(test::to_doubles(out), test::to_doubles(out2), 0.0, 0.0, "out with lse");
  const std::vector<double> qd = test::to_doubles(q), kd = test::to_doubles(k);
  const std::vector<double> got = test::to_doubles(lse);
  std::vector<double> want(got.size());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t ti = 0; ti < t; ++ti) {
        double sum = 0.0;
        for (int64_t p = 0; p <= ti; ++p) {
          if (docs[bi * t + p] != docs[bi * t + ti]) continue;
          double s = 0.0;
          for (int64_t i = 0; i < d; ++i)
            s += qd[((bi * t + ti) * heads + h) * d + i] *
                 kd[((bi * t + p) * kv_heads + h / n_rep) * d + i];
          sum += std::exp(s * scale);
        }
        want[(bi * heads + h) * t + ti] = std::log(sum);
      }
  test::expect_close(got, want, 1e-5, 1e-5, "lse vs log(sum exp)");

  Tensor dout = random_tensor(q.shape(), DType::kF32, 24);
  Tensor dq = Tensor::empty(q.shape(), DType::kF32), dk = Tensor::empty(k.shape(), DType::kF32),
         dv = Tensor::empty(k.shape(), DType::kF32);
  Tensor dq2 = dq.clone(), dk2 = dk.clone(), dv2 = dv.clone();
  ops::causal_attention_backward(q, k, v, doc_ids, scale, out, dout, dq, dk, dv);
  ops::causal_attention_backward(q, k, v, doc_ids, scale, out, dout, dq2, dk2, dv2, lse);
  test::expect_close(test::to_doubles(dq2), test::to_doubles(dq), 1e-5, 1e-4, "dq with lse");
  test::expect_close(test::to_doubles(dk2), test::to_doubles(dk), 1e-5, 1e-4, "dk with lse");
  test::expect_close(test::to_doubles(dv2), test::to_doubles(dv), 1e-5, 1e-4, "dv with lse");

  Tensor bad = Tensor::empty({b, t, heads}, DType::kF32);  // [batch, seq, n_heads]: wrong order
  EXPECT_THROW(ops::causal_attention(q, k, v, doc_ids, scale, out, bad), InvalidArgument);
  EXPECT_THROW(ops::causal_attention_backward(q, k, v, doc_ids, scale, out, dout, dq, dk, dv, bad),
               InvalidArgument);
}

TEST(CausalAttentionBackward, RejectsMismatchedShapes) {
  Tensor q = Tensor::zeros({1, 4, 2, 8}, DType::kF32), k = Tensor::zeros({1, 4, 2, 8}, DType::kF32);
  Tensor dk_bad = Tensor::zeros({1, 4, 2, 4}, DType::kF32), none;
  Tensor dq = q.clone(), dv = k.clone();
  EXPECT_THROW(ops::causal_attention_backward(q, k, k, none, 1.0f, q, q, dq, dk_bad, dv),
               InvalidArgument);
}

TEST(CrossEntropyBackward, MatchesFiniteDifferencesWithSmoothingAndIgnore) {
  const int64_t rows = 5, vocab = 11;
  Tensor logits = random_tensor({rows, vocab}, DType::kF32, 21, -3.0f, 3.0f);
  Tensor targets = Tensor::from_vector(std::vector<int32_t>{3, -100, 0, 10, 7});
  for (float smoothing : {0.0f, 0.1f}) {
    const float grad_scale = 0.37f;
    auto loss = [&] {
      Tensor losses = Tensor::empty({rows}, DType::kF32);
      ops::cross_entropy(logits, targets, losses, -100, smoothing);
      std::vector<float> l = losses.to_vector<float>();
      double s = 0.0;
      for (float v : l) s += v;
      return grad_scale * s;
    };
    Tensor dlogits = Tensor::empty({rows, vocab}, DType::kF32);
    ops::cross_entropy_backward(logits, targets, dlogits, grad_scale, -100, smoothing);
    expect_grad_fd(logits, dlogits, loss, smoothing > 0 ? "ce smoothed" : "ce");
    std::vector<float> g = dlogits.to_vector<float>();
    for (int64_t j = 0; j < vocab; ++j) EXPECT_EQ(g[vocab + j], 0.0f);  // ignored row
    // In place on the logits gives the same.
    Tensor inplace = logits.clone();
    ops::cross_entropy_backward(inplace, targets, inplace, grad_scale, -100, smoothing);
    EXPECT_EQ(inplace.to_vector<float>(), g);
  }
  Tensor bad = Tensor::from_vector(std::vector<int32_t>{3, 11, 0, 1, 2});
  Tensor dl = Tensor::empty({rows, vocab}, DType::kF32);
  EXPECT_THROW(ops::cross_entropy_backward(logits, bad, dl, 1.0f), InvalidArgument);
}

TEST(SumRows, OverwritesOrAccumulates) {
  Tensor x = random_tensor({9, 70}, DType::kF32, 22);
  Tensor out = Tensor::zeros({70}, DType::kF32);
  ops::sum_rows(x, out, false);
  std::vector<double> xs = test::to_doubles(x), want(70, 0.0);
  for (int64_t r = 0; r < 9; ++r)
    for (int64_t c = 0; c < 70; ++c) want[c] += xs[r * 70 + c];
  test::expect_close(test::to_doubles(out), want, 1e-5, 1e-6, "sum_rows");
  ops::sum_rows(x, out, true);
  for (double& w : want) w *= 2;
  test::expect_close(test::to_doubles(out), want, 1e-5, 1e-6, "sum_rows accumulate");
  Tensor wrong = Tensor::zeros({69}, DType::kF32);
  EXPECT_THROW(ops::sum_rows(x, wrong, false), InvalidArgument);
}

}  // namespace
}  // namespace vela
