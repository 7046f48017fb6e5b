// TrainableModel: parameters, gradients against central finite differences of evaluate() (every
// element on a tiny model; spot checks on the fixture models), and the invariants the trainer
// relies on — checkpointing and CE chunking do not change gradients, accumulation adds up, packed
// documents equal separate sequences, bad batches are clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "../ops/grad_check_util.h"
#include "ops/cross_entropy.h"
#include "train/trainable_model.h"
#include "train_test_util.h"

namespace vela {
namespace {

// Central differences of evaluate().mean() for each parameter, every `stride`-th element.
// Tolerance: |analytic - numeric| <= atol + rtol * |numeric|. The step trades truncation error
// (the tiny models with large weights are strongly curved: h = 1e-3) against f32 rounding of the
// forward (the fixture models' gradients are small: h = 5e-3). The worst element uses under half
// of its tolerance (tests record "<param>_tolerance_used").
void check_model_fd(Transformer& model, const TrainBatch& batch, const TrainOptions& opts,
                    int64_t max_checks_per_param, double h, double atol, double rtol) {
  TrainableModel tm(model, opts);
  LossStats st = tm.forward_backward(batch, 1.0f);
  ASSERT_GT(st.n_tokens, 0);
  auto loss = [&] { return tm.evaluate(batch).mean(); };
  EXPECT_NEAR(loss(), st.mean(), 1e-5 * std::fabs(st.mean()));
  for (Parameter& p : tm.parameters()) {
    const int64_t stride = std::max<int64_t>(1, p.value.numel() / max_checks_per_param);
    test::expect_grad_fd(p.value, p.grad, loss, p.name, h, atol, rtol, stride);
  }
}

TEST(TrainableModel, ParametersFollowTheModelInFixedOrder) {
  Transformer m = test::tiny_model(test::tiny_config(true, true, false), 1);
  TrainableModel tm(m, {});
  std::vector<std::string> names;
  for (const Parameter& p : tm.parameters()) {
    names.push_back(p.name);
    EXPECT_EQ(p.grad.dtype(), DType::kF32) << p.name;
    EXPECT_EQ(p.grad.shape(), p.value.shape()) << p.name;
    EXPECT_EQ(p.grad.to_vector<float>(), std::vector<float>(p.grad.numel(), 0.0f)) << p.name;
  }
  std::vector<std::string> want = {"model.embed_tokens.weight"};
  for (int l = 0; l < 2; ++l) {
    std::string pre = "model.layers." + std::to_string(l) + ".";
    for (const char* s :
         {"input_layernorm.weight", "self_attn.qkv_proj.weight", "self_attn.qkv_proj.bias",
          "self_attn.o_proj.weight", "self_attn.o_proj.bias", "self_attn.q_norm.weight",
          "self_attn.k_norm.weight", "post_attention_layernorm.weight", "mlp.gate_up_proj.weight",
          "mlp.down_proj.weight"})
      want.push_back(pre + s);
  }
  want.push_back("model.norm.weight");
  want.push_back("lm_head.weight");
  EXPECT_EQ(names, want);
  // value aliases the model weight.
  Parameter* qkv = tm.find_parameter("model.layers.1.self_attn.qkv_proj.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->value.data_ptr(), m.blocks[1].attn.qkv.weight.data_ptr());
  EXPECT_EQ(qkv->kind, ParamKind::kMatrix);
  EXPECT_EQ(tm.find_parameter("model.norm.weight")->kind, ParamKind::kNorm);
  EXPECT_EQ(tm.find_parameter("model.layers.0.self_attn.qkv_proj.bias")->kind, ParamKind::kBias);
  EXPECT_EQ(tm.find_parameter("lm_head.weight")->kind, ParamKind::kEmbedding);
  EXPECT_EQ(tm.find_parameter("nope"), nullptr);

  Transformer tied = test::tiny_model(test::tiny_config(false, false, true), 2);
  TrainableModel tt(tied, {});
  EXPECT_EQ(tt.find_parameter("lm_head.weight"), nullptr);
  EXPECT_EQ(tt.parameters().size(), 1u + 2u * 6u + 1u);
}

TEST(TrainableModel, EveryGradientMatchesFiniteDifferencesOnATinyModel) {
  // Untied, biases everywhere, GQA, packed documents, ignored targets: every element checked.
  Transformer m = test::tiny_model(test::tiny_config(true, false, false), 3);
  check_model_fd(m, test::packed_batch(23), {}, 1 << 20, 1e-3, 2e-4, 2e-2);
}

TEST(TrainableModel, TiedQkNormAndLabelSmoothingMatchFiniteDifferences) {
  Transformer m = test::tiny_model(test::tiny_config(false, true, true), 4);
  TrainOptions o;
  o.label_smoothing = 0.1f;
  o.ce_chunk_tokens = 5;  // several chunks, one of them partly ignored
  check_model_fd(m, test::packed_batch(23, 8, 11), o, 1 << 20, 1e-3, 2e-4, 2e-2);
}

class FixtureModelFd : public testing::TestWithParam<std::string> {};

TEST_P(FixtureModelFd, SpotChecksEveryParameter) {
  const std::string dir = "fixtures/models/" + GetParam();
  if (!std::filesystem::exists(dir + "/model.safetensors")) GTEST_SKIP() << dir << " missing";
  Transformer m = Transformer::load(dir, DType::kF32, Device::cpu());
  TrainOptions o;
  o.ce_chunk_tokens = 7;
  check_model_fd(m, test::packed_batch(m.config.vocab_size, 12, 5), o, 24, 5e-3, 3e-4, 3e-2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureModelFd,
                         testing::Values("qwen2_bias_tied", "qwen3_qknorm", "llama_yarn",
                                         "llama3_scaling", "llama_mha_tied_linear"));

std::vector<std::vector<float>> grads_of(TrainableModel& tm) {
  std::vector<std::vector<float>> g;
  for (const Parameter& p : tm.parameters()) g.push_back(p.grad.to_vector<float>());
  return g;
}

TEST(TrainableModel, ActivationCheckpointingGivesIdenticalGradients) {
  Transformer m = test::tiny_model(test::tiny_config(true, true, false), 5);
  TrainBatch batch = test::packed_batch(23);
  TrainOptions plain, ckpt;
  ckpt.activation_checkpointing = true;
  TrainableModel a(m, plain), b(m, ckpt);
  LossStats la = a.forward_backward(batch), lb = b.forward_backward(batch);
  EXPECT_EQ(la.loss_sum, lb.loss_sum);
  EXPECT_EQ(la.n_tokens, lb.n_tokens);
  EXPECT_EQ(grads_of(a), grads_of(b));  // bit for bit
}

TEST(TrainableModel, ChunkSizeDoesNotChangeLossOrGradients) {
  Transformer m = test::tiny_model(test::tiny_config(false, false, true), 6);
  TrainBatch batch = test::packed_batch(23, 8, 3);
  // The first two 3-row chunks hold no target at all (their rows' gradient must be zero).
  for (int i = 0; i < 6; ++i) batch.targets.data<int32_t>()[i] = kIgnoreIndex;
  TrainOptions big, small;
  small.ce_chunk_tokens = 3;
  TrainableModel a(m, big), b(m, small);
  LossStats la = a.forward_backward(batch), lb = b.forward_backward(batch);
  EXPECT_NEAR(la.loss_sum, lb.loss_sum, 1e-5 * std::fabs(la.loss_sum));
  auto ga = grads_of(a), gb = grads_of(b);
  for (size_t i = 0; i < ga.size(); ++i)
    for (size_t j = 0; j < ga[i].size(); ++j)
      ASSERT_NEAR(ga[i][j], gb[i][j], 1e-6 + 1e-5 * std::fabs(ga[i][j])) << a.parameters()[i].name;
}

TEST(TrainableModel, GradientsAccumulateAcrossMicroBatchesUntilZeroGrad) {
  Transformer m = test::tiny_model(test::tiny_config(true, false, false), 7);
  TrainBatch batch = test::packed_batch(23);
  TrainableModel tm(m, {});
  tm.forward_backward(batch, 1.0f);
  auto once = grads_of(tm);
  tm.zero_grad();
  tm.forward_backward(batch, 0.5f);
  tm.forward_backward(batch, 0.5f);
  auto twice = grads_of(tm);
  for (size_t i = 0; i < once.size(); ++i)
    for (size_t j = 0; j < once[i].size(); ++j)
      ASSERT_NEAR(twice[i][j], once[i][j], 1e-6 + 1e-6 * std::fabs(once[i][j]));
  tm.zero_grad();
  for (const auto& g : grads_of(tm)) EXPECT_EQ(g, std::vector<float>(g.size(), 0.0f));
}

TEST(TrainableModel, PackedDocumentsEqualSeparateSequences) {
  // Row 1 of packed_batch holds documents of lengths 2, 4, 2 (seq 8). Running each document as
  // its own sequence, weighted by its share of the target tokens, must give the same gradients.
  Transformer m = test::tiny_model(test::tiny_config(true, true, false), 8);
  TrainBatch packed = test::packed_batch(23);
  std::vector<int32_t> ids = packed.ids.to_vector<int32_t>(),
                       tg = packed.targets.to_vector<int32_t>();
  TrainBatch row1;
  row1.ids = Tensor::from_vector(std::vector<int32_t>(ids.begin() + 8, ids.end()), {1, 8});
  row1.targets = Tensor::from_vector(std::vector<int32_t>(tg.begin() + 8, tg.end()), {1, 8});
  row1.doc_ids = packed.doc_ids.slice(0, 1, 2).contiguous();
  TrainableModel a(m, {});
  LossStats whole = a.forward_backward(row1, 1.0f);
  TrainableModel b(m, {});
  const int lens[3] = {2, 4, 2};
  int start = 0;
  LossStats parts;
  for (int len : lens) {
    TrainBatch d;
    d.ids = Tensor::from_vector(
        std::vector<int32_t>(ids.begin() + 8 + start, ids.begin() + 8 + start + len), {1, len});
    d.targets = Tensor::from_vector(
        std::vector<int32_t>(tg.begin() + 8 + start, tg.begin() + 8 + start + len), {1, len});
    const float share = static_cast<float>(len - 1) / static_cast<float>(whole.n_tokens);
    LossStats s = b.forward_backward(d, share);
    parts.loss_sum += s.loss_sum;
    parts.n_tokens += s.n_tokens;
    start += len;
  }
  EXPECT_EQ(parts.n_tokens, whole.n_tokens);
  EXPECT_NEAR(parts.loss_sum, whole.loss_sum, 1e-5 * std::fabs(whole.loss_sum));
  auto ga = grads_of(a), gb = grads_of(b);
  for (size_t i = 0; i < ga.size(); ++i)
    for (size_t j = 0; j < ga[i].size(); ++j)
      ASSERT_NEAR(ga[i][j], gb[i][j], 1e-6 + 1e-4 * std::fabs(ga[i][j])) << a.parameters()[i].name;
}

TEST(TrainableModel, EvaluateMatchesTheInferenceForward) {
  Transformer m = test::tiny_model(test::tiny_config(true, false, false), 9);
  TrainBatch batch = test::packed_batch(23);
  TrainOptions o;
  o.label_smoothing = 0.2f;
  TrainableModel tm(m, o);
  LossStats ev = tm.evaluate(batch);
  Tensor logits = m.forward_dense(batch.ids, batch.doc_ids).view({16, 23});
  Tensor losses = Tensor::empty({16}, DType::kF32);
  ops::cross_entropy(logits, batch.targets.view({16}), losses, kIgnoreIndex, 0.2f);
  double sum = 0.0;
  for (float v : losses.to_vector<float>()) sum += v;
  EXPECT_NEAR(ev.loss_sum, sum, 1e-5 * sum);
  EXPECT_EQ(ev.n_tokens, 10);  // 7 - 2 in row 0, 1 + 3 + 1 in row 1
  LossStats fb = tm.forward_backward(batch);
  EXPECT_NEAR(fb.loss_sum, ev.loss_sum, 1e-5 * sum);
}

TEST(TrainableModel, ABatchWithoutTargetsIsANoOp) {
  Transformer m = test::tiny_model(test::tiny_config(false, false, false), 10);
  TrainableModel tm(m, {});
  TrainBatch b = test::packed_batch(23);
  b.targets = Tensor::from_vector(std::vector<int32_t>(16, kIgnoreIndex), {2, 8});
  LossStats s = tm.forward_backward(b);
  EXPECT_EQ(s.n_tokens, 0);
  EXPECT_EQ(s.mean(), 0.0);
  for (const auto& g : grads_of(tm)) EXPECT_EQ(g, std::vector<float>(g.size(), 0.0f));
}

TEST(TrainableModel, BadBatchesAreClearErrors) {
  Transformer m = test::tiny_model(test::tiny_config(false, false, false), 11);
  TrainableModel tm(m, {});
  TrainBatch good = test::packed_batch(23);
  TrainBatch b = good;
  b.ids = Tensor::from_vector(std::vector<int32_t>(16, 23), {2, 8});
  EXPECT_THROW(tm.forward_backward(b), InvalidArgument);  // id outside the vocabulary
  b = good;
  b.targets = Tensor::from_vector(std::vector<int32_t>(16, -5), {2, 8});
  EXPECT_THROW(tm.forward_backward(b), InvalidArgument);  // target neither token nor ignore
  b = good;
  b.targets = Tensor::from_vector(std::vector<int32_t>(8, 1), {1, 8});
  EXPECT_THROW(tm.forward_backward(b), InvalidArgument);  // shape
  b = good;
  b.doc_ids = Tensor::from_vector(std::vector<int32_t>(8, 0), {2, 4});
  EXPECT_THROW(tm.evaluate(b), InvalidArgument);
  b = good;
  b.positions = Tensor::from_vector(std::vector<int32_t>(16, 40), {2, 8});
  EXPECT_THROW(tm.forward_backward(b), InvalidArgument);  // beyond max_position_embeddings
  b = good;
  b.n_target_tokens = 3;
  EXPECT_THROW(tm.forward_backward(b), InvalidArgument);
  b = good;
  b.ids = Tensor();
  EXPECT_THROW(tm.forward_backward(b), InvalidArgument);
  TrainOptions bad;
  bad.ce_chunk_tokens = 0;
  EXPECT_THROW(TrainableModel(m, bad), InvalidArgument);
  bad = TrainOptions{};
  bad.label_smoothing = 1.5f;
  EXPECT_THROW(TrainableModel(m, bad), InvalidArgument);
  Transformer half = Transformer::random(m.config, DType::kBF16, Device::cpu(), 1);
  EXPECT_THROW(TrainableModel(half, {}), InvalidArgument);  // CPU training is f32
}

}  // namespace
}  // namespace vela
