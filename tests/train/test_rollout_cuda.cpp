// The RL loop's engine/trainer contract on CUDA: rollouts of the in-process engine (paged KV,
// CUDA graphs, the device sampler's tempered log-probs) against the trainer's log-probs of the
// same tokens under the same weights and version (dense forward, chunked LM head at the same
// temperature). f32: max |diff| <= 2e-3 (cuBLAS reductions; the CPU gets 1e-5). bf16: the two
// paths round activations at different places, so the difference is a distribution, printed as
// quantiles; the bounds (p50 <= 0.02, p99 <= 0.1, max <= 0.5) hold with a wide margin on the H200
// (bench/results/rl_consistency_h200.txt has the measured numbers). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "core/rng.h"
#include "engine/engine.h"
#include "ops/elementwise.h"
#include "train/strategies/grpo.h"
#include "train/trainable_model.h"

namespace vela {
namespace {

ModelConfig qwen_like() {
  json c = {
      {"model_type", "qwen3"},       {"vocab_size", 4096},     {"hidden_size", 256},
      {"intermediate_size", 768},    {"num_hidden_layers", 4}, {"num_attention_heads", 4},
      {"num_key_value_heads", 2},    {"head_dim", 64},         {"max_position_embeddings", 512},
      {"tie_word_embeddings", false}};
  return ModelConfig::from_json(c, "qwen_like");
}

struct Quantiles {
  double p50 = 0, p99 = 0, max = 0, mean = 0;
  int64_t n = 0;
};

// |engine - trainer| log-prob over every sampled token of a rollout on `m` at `temperature`.
Quantiles rollout_vs_trainer(const Transformer& m, float temperature, uint64_t seed) {
  EngineConfig ec;
  ec.max_seqs = 64;
  ec.max_ctx = 160;
  Engine engine(Transformer(m), nullptr, ec);  // shares the model's storage, as GrpoStrategy
  std::vector<std::vector<int32_t>> prompts;
  Rng rng(seed);
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(12 + 9 * i));
    for (int32_t& t : p) t = static_cast<int32_t>(rng.uniform() * 4000.0f);
    prompts.push_back(p);
  }
  SamplingParams p;
  p.n = 8;
  p.max_tokens = 64;
  p.ignore_eos = true;
  p.seed = seed;
  p.temperature = temperature;
  p.logprobs_mode = LogprobsMode::kTempered;
  const auto out = engine.run_batch(prompts, p);
  RolloutResult r;
  r.prompts = prompts;
  r.group_size = p.n;
  std::vector<size_t> idx;
  for (size_t i = 0; i < out.size(); ++i)
    for (const RolloutSample& s : out[i]) {
      RolloutItem it;
      it.prompt = static_cast<int64_t>(i);
      it.tokens = s.tokens;
      it.logprobs = s.logprobs;
      idx.push_back(r.items.size());
      r.items.push_back(it);
    }
  GrpoStrategy strategy(GrpoConfig{});
  TrainBatch b = strategy.rollout_batch(r, idx, std::vector<double>(r.items.size(), 0.0));
  const std::vector<float> lp = TrainableModel::model_token_logprobs(m, b, 4096, temperature);
  const std::vector<float> blp = b.behaviour_logprobs.to_vector<float>();
  const std::vector<int32_t> tg = b.targets.to_vector<int32_t>();
  std::vector<double> d;
  for (size_t i = 0; i < lp.size(); ++i)
    if (tg[i] != kIgnoreIndex) d.push_back(std::fabs(static_cast<double>(lp[i]) - blp[i]));
  Quantiles q;
  q.n = static_cast<int64_t>(d.size());
  if (d.empty()) return q;
  std::sort(d.begin(), d.end());
  auto at = [&](double f) { return d[std::min(d.size() - 1, static_cast<size_t>(f * d.size()))]; };
  q.p50 = at(0.5);
  q.p99 = at(0.99);
  q.max = d.back();
  for (double x : d) q.mean += x;
  q.mean /= static_cast<double>(d.size());
  return q;
}

TEST(RolloutCuda, BehaviourLogprobsMatchTheTrainerInF32AndBf16) {
  if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device";
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Transformer m = Transformer::random(qwen_like(), dt, Device::cuda(0), 11);
    // A peaked head (logit std ~3 instead of ~0.3 at init), as a trained model has.
    ops::scale(m.lm_head.weight, 10.0f, m.lm_head.weight);
    for (float t : {1.0f, 0.7f}) {
      const Quantiles q = rollout_vs_trainer(m, t, 5);
      std::printf(
          "rl consistency %s T=%.1f: |behaviour - trainer| log-prob over %lld tokens: p50 %.3g  "
          "p99 %.3g  max %.3g  mean %.3g\n",
          dtype_name(dt), t, static_cast<long long>(q.n), q.p50, q.p99, q.max, q.mean);
      ASSERT_EQ(q.n, 8 * 8 * 64);
      if (dt == DType::kF32) {
        EXPECT_LE(q.max, 2e-3);
      } else {
        EXPECT_LE(q.p50, 0.02);
        EXPECT_LE(q.p99, 0.1);
        EXPECT_LE(q.max, 0.5);
      }
    }
  }
}

}  // namespace
}  // namespace vela
