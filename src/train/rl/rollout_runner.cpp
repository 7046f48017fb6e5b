// RolloutRunner: prompts -> engine rollouts -> rewards; see rollout_runner.h.
#include "train/rl/rollout_runner.h"

#include "core/error.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "train/rl/reward.h"

namespace vela {

json RolloutResult::to_json() const {
  json items_j = json::array();
  for (const RolloutItem& it : items)
    items_j.push_back({{"prompt", it.prompt},
                       {"tokens", it.tokens},
                       {"logprobs", it.logprobs},
                       {"text", it.text},
                       {"policy_version", it.policy_version},
                       {"reward", it.reward}});
  return json{{"step", step},
              {"prompts", prompts},
              {"answers", answers},
              {"group_size", group_size},
              {"items", items_j}};
}

RolloutResult RolloutResult::from_json(const json& j) {
  RolloutResult r;
  try {
    r.step = j.at("step").get<int64_t>();
    r.prompts = j.at("prompts").get<std::vector<std::vector<int32_t>>>();
    r.answers = j.at("answers").get<std::vector<std::string>>();
    r.group_size = j.at("group_size").get<int64_t>();
    for (const json& it : j.at("items")) {
      RolloutItem x;
      x.prompt = it.at("prompt").get<int64_t>();
      x.tokens = it.at("tokens").get<std::vector<int32_t>>();
      x.logprobs = it.at("logprobs").get<std::vector<float>>();
      x.text = it.at("text").get<std::string>();
      x.policy_version = it.at("policy_version").get<uint64_t>();
      x.reward = it.at("reward").get<double>();
      r.items.push_back(std::move(x));
    }
  } catch (const json::exception& e) {
    VELA_THROW(InvalidArgument, "checkpoint: malformed rollout state (", e.what(), ")");
  }
  return r;
}

RolloutRunner::RolloutRunner(Engine& engine, const Tokenizer& tokenizer, const Reward& reward,
                             SamplingParams params, int64_t group_size, int64_t rollout_interval,
                             uint64_t seed)
    : engine_(engine),
      tokenizer_(tokenizer),
      reward_(reward),
      params_(std::move(params)),
      group_size_(group_size),
      interval_(rollout_interval),
      seed_(seed) {
  VELA_CHECK(group_size_ >= 2, "RolloutRunner: group_size must be >= 2, got ", group_size_);
  VELA_CHECK(interval_ >= 1, "RolloutRunner: rollout_interval must be >= 1");
  params_.n = static_cast<int32_t>(group_size_);
  params_.logprobs = true;
}

bool RolloutRunner::due(int64_t step) const { return !has_ || step % interval_ == 0; }

uint64_t RolloutRunner::current_version() const {
  return version_offset_ + engine_.policy_version();
}

void RolloutRunner::restore(RolloutResult r) {
  result_ = std::move(r);
  has_ = true;
}

std::pair<const RolloutResult&, bool> RolloutRunner::operator()(
    int64_t step, const std::vector<std::vector<int32_t>>& prompts,
    const std::vector<std::string>& answers) {
  if (!due(step)) return {result_, false};
  VELA_CHECK(!prompts.empty() && prompts.size() == answers.size(),
             "RolloutRunner: ", prompts.size(), " prompts with ", answers.size(), " answers");
  // Engine::run_batch submits every prompt at one step boundary, so the batch composition, and
  // with it every float, is the same in every run; prompt i gets the seed base + i, the base
  // derived from (seed, step), so a resumed run samples what the uninterrupted one did.
  SamplingParams p = params_;
  p.seed = (seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step) + 1) * 0x100000001B3ull;
  std::vector<std::vector<RolloutSample>> out = engine_.run_batch(prompts, p);
  VELA_CHECK(out.size() == prompts.size(), "engine returned ", out.size(), " groups for ",
             prompts.size(), " prompts");
  RolloutResult r;
  r.step = step;
  r.prompts = prompts;
  r.answers = answers;
  r.group_size = group_size_;
  std::vector<RewardInput> inputs;
  for (size_t i = 0; i < out.size(); ++i) {
    VELA_CHECK(static_cast<int64_t>(out[i].size()) == group_size_, "engine returned ",
               out[i].size(), " samples for prompt ", i, ", expected ", group_size_);
    const std::string prompt_text = tokenizer_.decode(prompts[i], /*skip_special_tokens=*/false);
    for (RolloutSample& s : out[i]) {
      VELA_CHECK(s.logprobs.size() == s.tokens.size(), "engine sample has ", s.tokens.size(),
                 " tokens but ", s.logprobs.size(), " log-probs");
      // run_batch finishes samples on the weights they started with (WeightUpdatePolicy
      // kFinishOld): one behaviour policy per sample, never mixed silently.
      VELA_CHECK(!s.mixed_versions, "rollout sample of prompt ", i,
                 " mixes policy versions (on_weight_update must not be \"mixed\" for rollouts)");
      RolloutItem it;
      it.prompt = static_cast<int64_t>(i);
      it.tokens = std::move(s.tokens);
      it.logprobs = std::move(s.logprobs);
      it.text = std::move(s.text);
      it.policy_version = version_offset_ + s.policy_version;
      inputs.push_back({prompt_text, it.text, answers[i], static_cast<int64_t>(it.tokens.size())});
      r.items.push_back(std::move(it));
    }
  }
  std::vector<double> rewards = reward_.score(inputs);
  VELA_CHECK(rewards.size() == r.items.size(), "reward returned ", rewards.size(), " scores for ",
             r.items.size(), " samples");
  for (size_t k = 0; k < rewards.size(); ++k) r.items[k].reward = rewards[k];
  result_ = std::move(r);
  has_ = true;
  return {result_, true};
}

}  // namespace vela
