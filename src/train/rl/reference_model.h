// ReferenceModel: the frozen policy copy DPO and GRPO's KL term compare against. It holds its own
// compute weights (one more copy of the model's weights: 2 bytes per parameter in bf16, 4 in f32;
// no gradients, no optimizer state) and computes per-token log-probs, forward only, once per
// batch. It is loaded from a directory, or rebuilt deterministically (the same random init), or a
// deep copy of a model, and checked against the policy: a different vocabulary is an
// InvalidArgument naming both sizes.
#pragma once

#include <string>
#include <vector>

#include "model/transformer.h"
#include "train/train_batch.h"

namespace vela {

struct TrainerConfig;

// A copy of `m` owning fresh storage for every weight (a tied head stays tied).
Transformer deep_copy(const Transformer& m);

class ReferenceModel {
 public:
  // Takes the frozen weights; `policy` is only checked against (vocabulary, device, dtype).
  ReferenceModel(Transformer weights, const Transformer& policy, const std::string& what);

  // The reference a strategy's `reference` key names: `dir` when given; under LoRA the policy's
  // frozen base without the adapter (shares its weights: no extra memory); else the policy's
  // starting point: config.init_from, or the random init of config.model + config.seed. Falls back
  // to a deep copy of `policy` when neither exists (a model handed to the Trainer directly; only
  // valid before its first step, which the caller guarantees by not resuming).
  static ReferenceModel for_policy(const std::string& dir, const TrainerConfig& config,
                                   const Transformer& policy, bool policy_from_config,
                                   bool resumed);

  // Per-token log p(targets) of the batch, as TrainableModel::token_logprobs.
  std::vector<float> token_logprobs(const TrainBatch& batch, int64_t chunk_rows) const;
  const Transformer& model() const { return weights_; }

 private:
  Transformer weights_;
};

}  // namespace vela
