// The preference / RL losses on a tiny model: DPO (sigmoid, cDPO, IPO) and GRPO (clipped ratio,
// k3 KL) gradients against central finite differences of their forward-only losses, and the
// log-prob head against the cross-entropy path it must agree with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../ops/grad_check_util.h"
#include "train/rl/reference_model.h"
#include "train/strategies/dpo.h"
#include "train/strategies/grpo.h"
#include "train/trainable_model.h"
#include "train_test_util.h"

namespace vela {
namespace {

// [2 * n_pairs, seq] preference rows [c0, r0, c1, r1, ...]: random tokens, the last `resp`
// positions' targets trained (a shared prompt, responses that differ).
TrainBatch pair_batch(int64_t vocab, int64_t n_pairs, int64_t seq, int64_t resp, uint64_t seed) {
  Rng rng(seed);
  const int64_t rows = 2 * n_pairs;
  std::vector<int32_t> ids(rows * seq), targets(rows * seq, kIgnoreIndex);
  auto tok = [&] {
    return static_cast<int32_t>(rng.uniform() * static_cast<float>(vocab)) % vocab;
  };
  for (int64_t p = 0; p < n_pairs; ++p) {
    for (int64_t t = 0; t < seq; ++t) {
      const int32_t shared = tok();
      for (int64_t side = 0; side < 2; ++side) {
        const int64_t r = 2 * p + side;
        ids[r * seq + t] = t < seq - resp ? shared : tok();
      }
    }
    for (int64_t side = 0; side < 2; ++side) {
      const int64_t r = 2 * p + side;
      for (int64_t t = seq - resp - 1; t + 1 < seq; ++t)
        targets[r * seq + t] = ids[r * seq + t + 1];
    }
  }
  TrainBatch b;
  b.ids = Tensor::from_vector(ids, {rows, seq});
  b.targets = Tensor::from_vector(targets, {rows, seq});
  return b;
}

void check_dpo_fd(const DpoConfig& cfg) {
  const ModelConfig mc = test::tiny_config(/*bias=*/true, /*qk_norm=*/false, /*tied=*/false);
  Transformer policy = test::tiny_model(mc, 3);
  DpoStrategy dpo(cfg);
  dpo.set_reference(std::make_unique<ReferenceModel>(test::tiny_model(mc, 4), policy, "test"));
  TrainableModel tm(policy, {});
  const TrainBatch batch = pair_batch(mc.vocab_size, 3, 8, 3, 5);
  ASSERT_EQ(dpo.loss_units(batch), 3);
  MicroLoss fb = dpo.forward_backward(tm, batch, 1.0f);
  ASSERT_EQ(fb.n_units, 3);
  auto loss = [&] {
    MicroLoss m = dpo.evaluate(tm, batch);
    return m.loss_sum / static_cast<double>(m.n_units);
  };
  // Relative: at ~27 one f32 ulp of the summed loss is ~2e-6.
  EXPECT_NEAR(loss(), fb.loss_sum / 3, 1e-6 * std::max(1.0, std::abs(fb.loss_sum / 3)));
  // The losses reach ~27 (IPO's squared margin), where f32 rounding of the forward (~1e-6
  // absolute) over a 3e-3 step is 5% of a small gradient: Richardson extrapolation lets the step
  // be 2e-2 with O(h^4) truncation error instead.
  for (Parameter& p : tm.parameters())
    test::expect_grad_fd(p.value, p.grad, loss, p.name, 2e-2, 4e-4, 3e-2, 3,
                         /*richardson=*/true);
}

TEST(DpoLoss, SigmoidGradientsMatchFiniteDifferences) {
  DpoConfig c;
  c.beta = 0.5;
  check_dpo_fd(c);
}

TEST(DpoLoss, ConservativeDpoGradientsMatchFiniteDifferences) {
  DpoConfig c;
  c.beta = 0.3;
  c.label_smoothing = 0.2;
  check_dpo_fd(c);
}

TEST(DpoLoss, IpoGradientsMatchFiniteDifferences) {
  DpoConfig c;
  c.beta = 0.5;
  c.loss = "ipo";
  check_dpo_fd(c);
}

TEST(DpoLoss, PairLossFormulas) {
  DpoConfig c;
  c.beta = 0.5;
  // -log sigmoid(beta h) at h = 0 is log 2; its slope -beta / 2.
  EXPECT_NEAR(dpo_pair_loss(c, 0).loss, std::log(2.0), 1e-12);
  EXPECT_NEAR(dpo_pair_loss(c, 0).dloss_dh, -0.25, 1e-12);
  c.loss = "ipo";  // (h - 1 / (2 beta))^2
  EXPECT_NEAR(dpo_pair_loss(c, 3).loss, 4.0, 1e-12);
  EXPECT_NEAR(dpo_pair_loss(c, 3).dloss_dh, 4.0, 1e-12);
}

TEST(LogprobHead, MinusMeanLogprobEqualsTheCrossEntropyPath) {
  const ModelConfig mc = test::tiny_config(false, true, true);
  Transformer a = test::tiny_model(mc, 9);
  Transformer b = deep_copy(a);
  TrainableModel ta(a, {}), tb(b, {});
  const TrainBatch batch = test::packed_batch(mc.vocab_size);
  LossStats ce = ta.forward_backward(batch, 1.0f);
  const float k = -1.0f / static_cast<float>(ce.n_tokens);
  std::vector<float> logp = tb.forward_backward_logprobs(
      batch, [&](const std::vector<float>& lp) { return std::vector<float>(lp.size(), k); });
  double sum = 0;
  for (float v : logp) sum += v;
  EXPECT_NEAR(-sum, ce.loss_sum, 1e-4 * ce.loss_sum);
  for (size_t i = 0; i < ta.parameters().size(); ++i) {
    std::vector<float> ga = ta.parameters()[i].grad.to_vector<float>();
    std::vector<float> gb = tb.parameters()[i].grad.to_vector<float>();
    for (size_t j = 0; j < ga.size(); ++j)
      ASSERT_NEAR(ga[j], gb[j], 1e-5 + 1e-4 * std::fabs(ga[j])) << ta.parameters()[i].name;
  }
}

}  // namespace
}  // namespace vela

namespace vela {
namespace {

// A rollout-shaped batch: 4 samples (2 groups of 2) of a prompt of 4 tokens + 3 completion tokens,
// behaviour log-probs = the current ones + noise (ratios away from 1, some clipped).
TrainBatch grpo_batch(Transformer& m, GrpoStrategy& s, float temperature) {
  RolloutResult r;
  r.group_size = 2;
  r.prompts = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  r.answers = {"", ""};
  Rng rng(17);
  for (int64_t i = 0; i < 4; ++i) {
    RolloutItem it;
    it.prompt = i / 2;
    for (int k = 0; k < 3; ++k) it.tokens.push_back(static_cast<int32_t>(9 + (3 * i + k) % 13));
    it.logprobs.assign(3, 0.0f);
    it.reward = static_cast<double>(i % 2) + 0.25 * static_cast<double>(i);
    r.items.push_back(it);
  }
  std::vector<double> rewards;
  for (const auto& it : r.items) rewards.push_back(it.reward);
  TrainBatch b = s.rollout_batch(r, {0, 1, 2, 3}, group_advantages(rewards, 2, true));
  std::vector<float> lp = TrainableModel::model_token_logprobs(m, b, 4096, temperature);
  std::vector<float> tg(lp.size());
  float* blp = b.behaviour_logprobs.data<float>();
  for (size_t i = 0; i < lp.size(); ++i)
    blp[i] = lp[i] == 0.0f ? 0.0f : lp[i] + 0.4f * (rng.uniform() - 0.5f);
  return b;
}

void check_grpo_fd(const GrpoConfig& cfg, int64_t stride) {
  const ModelConfig mc = test::tiny_config(true, false, false);
  Transformer policy = test::tiny_model(mc, 21);
  GrpoStrategy s(cfg);
  if (cfg.kl_coef > 0)
    s.set_reference(std::make_unique<ReferenceModel>(test::tiny_model(mc, 22), policy, "test"));
  TrainableModel tm(policy, {});
  const TrainBatch b = grpo_batch(policy, s, static_cast<float>(cfg.temperature));
  MicroLoss fb = s.forward_backward(tm, b, 1.0f);
  ASSERT_GT(fb.n_units, 0);
  auto loss = [&] {
    MicroLoss m = s.evaluate_loss(tm, b);
    return m.loss_sum / static_cast<double>(m.n_units);
  };
  EXPECT_NEAR(loss(), fb.loss_sum / static_cast<double>(fb.n_units), 1e-6);
  // atol 2e-4: a central difference of the f32 forward over a 1e-3 step carries ~1e-4 of rounding
  // noise, and how much depends on the CPU's BLAS kernels (1.5e-4 seen on an AMD machine).
  for (Parameter& p : tm.parameters())
    test::expect_grad_fd(p.value, p.grad, loss, p.name, 1e-3, 2e-4, 3e-2, stride);
}

TEST(GrpoLoss, ClippedTokenLossGradientsMatchFiniteDifferences) {
  GrpoConfig c;
  c.clip_eps = 0.1;
  check_grpo_fd(c, 3);
}

TEST(GrpoLoss, KlSequenceAggregationAndTemperatureGradientsMatchFiniteDifferences) {
  GrpoConfig c;
  c.kl_coef = 0.3;
  c.loss_agg = "sequence";
  c.temperature = 0.7;  // policy and reference log-probs of softmax(logits / 0.7)
  check_grpo_fd(c, 7);
}

TEST(GrpoLoss, TokenLossAndAdvantages) {
  GrpoConfig c;  // clip 0.2
  // ratio 1: loss -A, slope -A; ratio above 1 + eps with A > 0: clipped, no gradient.
  EXPECT_NEAR(grpo_token_loss(c, -1.0, -1.0, 2.0, 0).loss, -2.0, 1e-12);
  EXPECT_NEAR(grpo_token_loss(c, -1.0, -1.0, 2.0, 0).dloss_dlogp, -2.0, 1e-12);
  GrpoTokenLoss hi = grpo_token_loss(c, -0.5, -1.0, 2.0, 0);
  EXPECT_TRUE(hi.clipped);
  EXPECT_NEAR(hi.loss, -1.2 * 2.0, 1e-12);
  EXPECT_EQ(hi.dloss_dlogp, 0.0);
  // ... but with A < 0 a high ratio is not clipped (pessimistic bound).
  EXPECT_FALSE(grpo_token_loss(c, -0.5, -1.0, -2.0, 0).clipped);
  // k3 at ref == logp is 0.
  c.kl_coef = 1.0;
  EXPECT_NEAR(grpo_token_loss(c, -1.0, -1.0, 0.0, -1.0).k3, 0.0, 1e-12);
  std::vector<double> a = group_advantages({1, 0, 1, 1}, 2, true);
  EXPECT_NEAR(a[0], 1 / (std::sqrt(0.5) + 1e-4) * 0.5, 1e-9);
  EXPECT_NEAR(a[0] + a[1], 0.0, 1e-12);
  EXPECT_EQ(a[2], 0.0);  // a group with equal rewards teaches nothing
  std::vector<double> raw = group_advantages({1, 0}, 2, false);
  EXPECT_NEAR(raw[0], 0.5, 1e-12);
  GrpoConfig g1;
  g1.group_size = 1;
  EXPECT_THROW(g1.validate(), InvalidArgument);
}

}  // namespace
}  // namespace vela
