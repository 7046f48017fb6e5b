// The RL loop's contract between the engine and the trainer: the behaviour log-probs the engine
// records (LogprobsMode::kTempered: log_softmax(logits / T) of the distribution it sampled from)
// equal the trainer's log-probs at the same temperature of the same tokens under the same weights
// (CPU f32, 1e-5, at T = 1 and T = 0.7), also after a weight push (the engine reads the trainer's
// storage; the push drops the prefix cache, so a repeated prompt is not served from KV of the old
// weights), and every sample carries the version of the weights that generated it.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/engine.h"
#include "ops/elementwise.h"
#include "train/rl/weight_push.h"
#include "train/strategies/grpo.h"
#include "train/trainable_model.h"
#include "train_test_util.h"

namespace vela {
namespace {

// Max |engine log-prob - trainer log-prob| over every sampled token of `out`.
double max_logprob_error(const Transformer& model, GrpoStrategy& s,
                         const std::vector<std::vector<int32_t>>& prompts,
                         const std::vector<std::vector<RolloutSample>>& out, float temperature,
                         int64_t* n_tokens) {
  RolloutResult r;
  r.prompts = prompts;
  r.group_size = static_cast<int64_t>(out[0].size());
  std::vector<size_t> idx;
  for (size_t i = 0; i < out.size(); ++i)
    for (const RolloutSample& smp : out[i]) {
      RolloutItem it;
      it.prompt = static_cast<int64_t>(i);
      it.tokens = smp.tokens;
      it.logprobs = smp.logprobs;
      if (it.tokens.empty()) continue;
      idx.push_back(r.items.size());
      r.items.push_back(it);
    }
  TrainBatch b = s.rollout_batch(r, idx, std::vector<double>(r.items.size(), 0.0));
  std::vector<float> lp = TrainableModel::model_token_logprobs(model, b, 4096, temperature);
  std::vector<float> blp = b.behaviour_logprobs.to_vector<float>();
  std::vector<int32_t> tg = b.targets.to_vector<int32_t>();
  double err = 0;
  *n_tokens = 0;
  for (size_t i = 0; i < lp.size(); ++i) {
    if (tg[i] == kIgnoreIndex) continue;
    err = std::max(err, static_cast<double>(std::fabs(lp[i] - blp[i])));
    *n_tokens += 1;
  }
  return err;
}

class RolloutConsistency : public ::testing::TestWithParam<float> {};

TEST_P(RolloutConsistency, BehaviourLogprobsEqualTrainerLogprobsAcrossAWeightPush) {
  const float temperature = GetParam();
  const ModelConfig mc = test::tiny_config(true, true, true, 23);
  Transformer model = test::tiny_model(mc, 31);
  EngineConfig ec;
  ec.max_seqs = 8;
  ec.max_ctx = 24;
  Engine engine(Transformer(model), nullptr, ec);  // shares the model's weight storage
  GrpoStrategy s(GrpoConfig{});
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4, 5}, {6, 7, 8}};
  SamplingParams p;
  p.n = 4;
  p.max_tokens = 8;
  p.ignore_eos = true;
  p.seed = 3;
  p.temperature = temperature;
  p.logprobs_mode = LogprobsMode::kTempered;  // as GrpoStrategy asks
  auto out0 = engine.run_batch(prompts, p);
  int64_t n0 = 0;
  const double e0 = max_logprob_error(model, s, prompts, out0, temperature, &n0);
  for (const auto& g : out0)
    for (const RolloutSample& smp : g) EXPECT_EQ(smp.policy_version, 0u);

  // An "optimizer step" in place on the shared storage, then the push.
  for (DecoderBlock& blk : model.blocks) ops::scale(blk.mlp.down.weight, 1.7f, blk.mlp.down.weight);
  ops::scale(model.final_norm, 0.6f, model.final_norm);
  EXPECT_EQ(push_weights(engine, model), 1u);
  auto out1 = engine.run_batch(prompts, p);  // the same prompts: a stale prefix cache would show
  int64_t n1 = 0;
  const double e1 = max_logprob_error(model, s, prompts, out1, temperature, &n1);
  for (const auto& g : out1)
    for (const RolloutSample& smp : g) EXPECT_EQ(smp.policy_version, 1u);
  std::printf(
      "consistency at T = %.1f: max |engine - trainer| log-prob %.3g over %lld tokens (v0), "
      "%.3g over %lld tokens (v1)\n",
      temperature, e0, static_cast<long long>(n0), e1, static_cast<long long>(n1));
  EXPECT_GT(n0, 0);
  EXPECT_LE(e0, 1e-5);
  EXPECT_LE(e1, 1e-5);
  EXPECT_TRUE(engine.check_integrity().empty()) << engine.check_integrity();
  if (temperature != 1.0f) {  // the untempered log-probs are not the behaviour policy's
    int64_t n_raw = 0;
    EXPECT_GT(max_logprob_error(model, s, prompts, out1, 1.0f, &n_raw), 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Temperatures, RolloutConsistency, ::testing::Values(1.0f, 0.7f));

}  // namespace
}  // namespace vela
