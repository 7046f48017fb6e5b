// TrainBatch: what a dataset yields and what one forward/backward consumes (dense [batch, seq]).
// targets[b, t] is the token to predict at position t (already shifted: ids[b, t + 1] for plain
// next-token training), or kIgnoreIndex where no loss is taken (prompt sections in SFT, padding,
// the last position of a document). doc_ids separate packed documents: attention never crosses
// a document boundary and positions restart at each document start.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace vela {

inline constexpr int32_t kIgnoreIndex = -100;

struct TrainBatch {
  Tensor ids;       // [batch, seq] i32, on the CPU (the trainer uploads)
  Tensor targets;   // [batch, seq] i32, kIgnoreIndex where masked
  Tensor doc_ids;   // [batch, seq] i32 or undefined (one document per row)
  Tensor positions; // [batch, seq] i32 or undefined (0..seq-1, restarting at document starts)
  int64_t n_target_tokens = 0;  // targets != kIgnoreIndex (for per-token loss normalisation)
  std::vector<int64_t> rows;    // shard sequence of each row (-1: padding); empty when unknown

  // RL rows (GRPO rollouts; undefined / empty otherwise):
  Tensor behaviour_logprobs;  // [batch, seq] f32: log p(targets[b, t]) under the weights that
                              // generated it, recorded by the engine at rollout time
  std::vector<float> advantages;         // [batch] one per row (a sample)
  std::vector<uint64_t> policy_versions;  // [batch] the policy version that generated each row
};

}  // namespace vela
