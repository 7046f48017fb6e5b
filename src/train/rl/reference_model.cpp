// The frozen reference model; see reference_model.h.
#include "train/rl/reference_model.h"

#include "core/error.h"
#include "core/log.h"
#include "model/lora_adapter.h"
#include "train/trainable_model.h"
#include "train/trainer_config.h"

namespace vela {

namespace {

Tensor copy_of(const Tensor& t) { return t.defined() ? t.clone() : Tensor(); }

void copy_linear(Linear& l) {
  l.weight = copy_of(l.weight);
  l.bias = copy_of(l.bias);
}

}  // namespace

Transformer deep_copy(const Transformer& m) {
  Transformer c = m;  // shares every tensor ...
  const bool tied = m.lm_head.weight.data_ptr() == m.embed.data_ptr();
  c.embed = copy_of(m.embed);  // ... until each is replaced by a copy
  c.final_norm = copy_of(m.final_norm);
  if (tied)
    c.lm_head.weight = c.embed;
  else
    copy_linear(c.lm_head);
  for (DecoderBlock& b : c.blocks) {
    b.input_norm = copy_of(b.input_norm);
    b.post_norm = copy_of(b.post_norm);
    copy_linear(b.attn.qkv);
    copy_linear(b.attn.o);
    b.attn.q_norm = copy_of(b.attn.q_norm);
    b.attn.k_norm = copy_of(b.attn.k_norm);
    copy_linear(b.mlp.gate_up);
    copy_linear(b.mlp.down);
  }
  return c;
}

ReferenceModel::ReferenceModel(Transformer weights, const Transformer& policy,
                               const std::string& what)
    : weights_(std::move(weights)) {
  VELA_CHECK(weights_.config.vocab_size == policy.config.vocab_size, "reference model ", what,
             " has a vocabulary of ", weights_.config.vocab_size, " tokens, the policy ",
             policy.config.vocab_size,
             ": log-prob ratios need the same tokenizer (give a reference of the policy's family)");
  VELA_CHECK(weights_.device() == policy.device() && weights_.dtype() == policy.dtype(),
             "reference model ", what, " is not on the policy's device / dtype");
}

ReferenceModel ReferenceModel::for_policy(const std::string& dir, const TrainerConfig& config,
                                          const Transformer& policy, bool policy_from_config,
                                          bool resumed) {
  const DType dt = policy.dtype();
  const Device dev = policy.device();
  if (!dir.empty()) return ReferenceModel(Transformer::load(dir, dt, dev), policy, "'" + dir + "'");
  // LoRA: the frozen base is the starting policy exactly (B = 0 at init) and stays frozen, so the
  // reference is the policy's own base weights without the adapter: no copy, valid on resume.
  if (config.train.lora) {
    VELA_LOG_INFO(
        "[train] reference model: the frozen base without the LoRA adapter (its weights "
        "are shared with the policy: no extra memory)");
    return ReferenceModel(without_lora(policy), policy, "(the frozen base)");
  }
  if (policy_from_config && !config.init_from.empty())
    return ReferenceModel(Transformer::load(config.init_from, dt, dev), policy,
                          "'" + config.init_from + "' (init_from)");
  if (policy_from_config && !config.model.empty())
    return ReferenceModel(
        Transformer::random(resolve_model_config(config.model), dt, dev, config.seed,
                            static_cast<float>(config.init_std)),
        policy,
        "(the random init of '" + config.model + "', seed " + std::to_string(config.seed) + ")");
  VELA_CHECK(!resumed,
             "the reference model cannot be rebuilt on resume: set the strategy's \"reference\" "
             "to the starting model's directory");
  return ReferenceModel(deep_copy(policy), policy, "(a copy of the starting policy)");
}

std::vector<float> ReferenceModel::token_logprobs(const TrainBatch& batch,
                                                  int64_t chunk_rows) const {
  return TrainableModel::model_token_logprobs(weights_, batch, chunk_rows);
}

}  // namespace vela
