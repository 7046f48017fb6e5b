// RolloutRunner: the generation half of the RL loop. It hands the prompts of a step to the
// in-process Engine (run_batch's submit-then-wait with n = G, all prompts submitted while the
// scheduler is held so they enter at one step; the G siblings of a prompt share its KV pages),
// decodes the completions, scores them with the reward and keeps the result; every sample carries
// the behaviour log-probs the engine recorded while sampling it and the policy version of the
// weights that generated it. The runner refreshes its rollouts every `rollout_interval`
// optimizer steps and reuses them in between, so a call returns (result, is_fresh).
//
// Versions: the engine's policy version counts weight pushes since the engine was built; the
// runner reports global versions = the trainer step of the weights (version_offset + engine
// version), which survive a resume. A sample is stale at step s when s - version >
// max_staleness.
//
// The result round-trips through JSON (to_json / from_json) so a checkpoint taken between two
// refreshes resumes with the same rollouts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "engine/sampling_params.h"

namespace vela {

class Engine;
class Reward;
class Tokenizer;

struct RolloutItem {
  int64_t prompt = 0;           // index into RolloutResult::prompts
  std::vector<int32_t> tokens;  // the completion
  std::vector<float> logprobs;  // behaviour log p of each completion token
  std::string text;
  uint64_t policy_version = 0;  // global version (trainer step of the generating weights)
  double reward = 0;
};

struct RolloutResult {
  int64_t step = 0;  // the optimizer step (completed steps) at which it was generated
  std::vector<std::vector<int32_t>> prompts;  // [n_prompts] prompt tokens
  std::vector<std::string> answers;           // [n_prompts]
  std::vector<RolloutItem> items;             // prompt-major: G per prompt
  int64_t group_size = 0;

  json to_json() const;
  static RolloutResult from_json(const json& j);
};

class RolloutRunner {
 public:
  // `engine`, `tokenizer`, `reward` must outlive the runner.
  RolloutRunner(Engine& engine, const Tokenizer& tokenizer, const Reward& reward,
                SamplingParams params, int64_t group_size, int64_t rollout_interval, uint64_t seed);

  // The rollouts for optimizer step `step` (steps completed so far): fresh ones generated from
  // `prompts` when step is a multiple of rollout_interval (or none are held), else the held ones.
  std::pair<const RolloutResult&, bool> operator()(int64_t step,
                                                   const std::vector<std::vector<int32_t>>& prompts,
                                                   const std::vector<std::string>& answers);
  // Whether operator()(step, ...) would generate (so the trainer draws prompts only then).
  bool due(int64_t step) const;

  // The global version of the engine's current weights (version_offset + engine version).
  uint64_t current_version() const;
  void set_version_offset(uint64_t offset) { version_offset_ = offset; }

  const RolloutResult* held() const { return has_ ? &result_ : nullptr; }
  void restore(RolloutResult r);

 private:
  Engine& engine_;
  const Tokenizer& tokenizer_;
  const Reward& reward_;
  SamplingParams params_;
  int64_t group_size_, interval_;
  uint64_t seed_;
  uint64_t version_offset_ = 0;
  RolloutResult result_;
  bool has_ = false;
};

}  // namespace vela
