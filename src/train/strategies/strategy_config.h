// The train config's strategy sections: "dpo": {...} and "grpo": {...} (docs/rl.md is the
// reference for every key). Parsing is strict like TrainerConfig: an unknown key or a wrong type
// is an InvalidArgument naming "dpo.<key>" / "grpo.<key>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela {

struct DpoConfig {
  double beta = 0.1;             // the KL-regularisation strength of the implicit reward
  std::string loss = "sigmoid";  // "sigmoid" (DPO; cDPO with label_smoothing > 0) | "ipo"
  double label_smoothing = 0.0;  // cDPO: the probability that a preference label is flipped
  // The frozen reference: a model directory; "" = the policy's starting point (init_from, or the
  // random init of "model" + "seed").
  std::string reference;

  static DpoConfig from_json(const json& j);
  json to_json() const;
  void validate() const;
};

struct GrpoConfig {
  int64_t group_size = 8;    // G samples per prompt (>= 2: advantages are group-relative)
  int64_t max_tokens = 16;   // completion length limit
  double temperature = 1.0;  // rollout sampling
  double top_p = 1.0;
  int64_t top_k = 0;
  std::vector<std::string> stop;   // stop strings besides the model's EOS
  int64_t rollout_interval = 1;    // optimizer steps per rollout (1 = on-policy)
  double clip_eps = 0.2;           // ratio clip [1 - clip_eps, 1 + clip_eps_high]
  double clip_eps_high = -1;       // < 0: = clip_eps
  bool scale_rewards = true;       // advantages (r - mean) / (std + 1e-4); false: r - mean
  double kl_coef = 0.0;            // k3 KL to a frozen reference (0 = no reference model)
  std::string reference;           // as DpoConfig::reference
  std::string loss_agg = "token";  // "token" (mean over all response tokens) | "sequence"
  bool drop_stale = true;          // drop samples older than max_staleness versions
  int64_t max_staleness = -1;      // < 0: rollout_interval - 1
  json reward = json{{"type", "exact_match"}};  // train/rl/reward.h
  int64_t engine_max_seqs = 0;                  // 0 = batch_size * group_size
  int64_t engine_page_size = 16;

  double effective_clip_high() const { return clip_eps_high < 0 ? clip_eps : clip_eps_high; }
  int64_t effective_max_staleness() const {
    return max_staleness < 0 ? rollout_interval - 1 : max_staleness;
  }

  static GrpoConfig from_json(const json& j);
  json to_json() const;
  void validate() const;
};

}  // namespace vela
