// grpo: Group Relative Policy Optimisation on rollouts from the in-process engine (train/rl/).
//
// Each step (or every rollout_interval steps) the step's prompts (dataset kind "prompt") go to
// the RolloutRunner: G samples per prompt with the behaviour log-probs the engine recorded, a
// reward each. Advantages are group-relative: A_i = (r_i - mean_g r) / (std_g r + 1e-4) (std the
// unbiased one of the group; scale_rewards false: A_i = r_i - mean_g r). Per response token t of
// sample i, with ratio rho = exp(log pi(t) - log pi_behaviour(t)), both log-probs those of
// softmax(logits / temperature), the distribution the rollout sampled from (before top-k / top-p):
//   l_t = -min(rho A_i, clip(rho, 1 - clip_eps, 1 + clip_eps_high) A_i)
//         + kl_coef * (exp(ref - log pi) - (ref - log pi) - 1)          (k3, when kl_coef > 0)
// aggregated over tokens ("token": sum over all the step's response tokens / their count;
// "sequence": mean over samples of each sample's token mean). The prompt and padding take no
// loss. The behaviour log-probs are never recomputed: with rollout_interval 1 the ratio is 1 at
// the first (only) step on a rollout and the clip acts from the second use on.
//
// Every sample carries the policy version (trainer step) of the weights that generated it; a
// sample older than max_staleness versions at the step it would train in is counted (n_stale)
// and dropped (drop_stale false: trained on, counted, warned about). The weights are pushed to
// the engine after every optimizer step (train/rl/weight_push.h). Metrics: reward_mean,
// reward_std, clip_frac, kl (mean k3; with a reference), n_samples, n_stale, rollout_fresh,
// completion_tokens, policy_version.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "train/rl/reference_model.h"
#include "train/rl/rollout_runner.h"
#include "train/strategies/strategy.h"
#include "train/strategies/strategy_config.h"

namespace vela {

class Engine;
class Reward;
class Tokenizer;

// Group-normalised advantages of rewards laid out prompt-major in groups of `group_size`.
std::vector<double> group_advantages(const std::vector<double>& rewards, int64_t group_size,
                                     bool scale_by_std);

// The per-token GRPO loss and its derivative w.r.t. log pi (for the loss tests).
struct GrpoTokenLoss {
  double loss = 0, dloss_dlogp = 0;
  bool clipped = false;
  double k3 = 0;
};
GrpoTokenLoss grpo_token_loss(const GrpoConfig& c, double logp, double behaviour_logp,
                              double advantage, double ref_logp);

class GrpoStrategy final : public Strategy {
 public:
  explicit GrpoStrategy(GrpoConfig config);
  ~GrpoStrategy() override;
  const char* name() const override { return "grpo"; }
  const char* data_kind() const override { return "prompt"; }
  void attach(Trainer& trainer) override;
  bool draws_data(const Trainer& trainer) const override;
  void prepare_step(Trainer& trainer, std::vector<TrainBatch>& micro) override;
  int64_t loss_units(const TrainBatch& batch) const override;
  MicroLoss forward_backward(TrainableModel& model, const TrainBatch& batch,
                             float loss_scale) override;
  MicroLoss evaluate(TrainableModel&, const TrainBatch&) override { return {}; }
  json step_metrics() const override { return metrics_; }
  json state() const override;
  void restore(const json& state) override;

  // The weight push after an optimizer step (called by the strategy's callback).
  void after_optimizer_step(Trainer& trainer);
  Engine& engine() { return *engine_; }
  RolloutRunner& runner() { return *runner_; }

  // The loss of a rollout batch under the current weights, forward only (the FD tests' oracle).
  MicroLoss evaluate_loss(TrainableModel& model, const TrainBatch& batch);
  // For tests: a reference instead of the one attach() builds.
  void set_reference(std::unique_ptr<ReferenceModel> r) { ref_ = std::move(r); }

  // The training rows of a rollout: one per kept sample, [n, seq] with the prompt masked.
  TrainBatch rollout_batch(const RolloutResult& r, const std::vector<size_t>& items,
                           const std::vector<double>& advantages) const;

 private:
  MicroLoss loss_of(const TrainBatch& b, const std::vector<float>& logp,
                    const std::vector<float>& ref, float loss_scale, std::vector<float>* coef);

  const Transformer& engine_model() const { return *policy_; }

  GrpoConfig config_;
  const Transformer* policy_ = nullptr;  // the trainer's model
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Reward> reward_;
  std::unique_ptr<RolloutRunner> runner_;
  std::unique_ptr<ReferenceModel> ref_;
  std::vector<std::string> answers_;  // per shard sequence (answers.jsonl)
  int64_t chunk_rows_ = 4096;
  int64_t grad_accum_ = 1;
  json metrics_ = json::object();
  double clipped_ = 0, kl_sum_ = 0;
  int64_t n_loss_tokens_ = 0;
};

}  // namespace vela
