// TrainableModel: the training view of a Transformer — its parameters with f32 gradients, and one
// explicit forward + backward of the mean next-token cross-entropy over a dense TrainBatch.
//
// The forward runs layer by layer saving what each backward needs (llm.c style: nn/*.h
// forward_train / backward pairs); the LM head and the loss are fused and chunked
// (nn/lm_head_loss.h) so [n_tokens, vocab] logits never exist at once. With activation
// checkpointing each block keeps only its input and recomputes its forward during backward
// (identical gradients, less memory).
//
// Gradients ACCUMULATE (+=) into parameters()[i].grad across forward_backward calls until
// zero_grad(); that is how the trainer does gradient accumulation. Parameter order and names are
// fixed (see parameters()). Not thread-safe: one forward_backward at a time per instance.
// Throws InvalidArgument for a malformed batch (shapes, dtypes, ids or targets out of range).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/lora_adapter.h"
#include "model/transformer.h"
#include "train/moe_losses.h"
#include "train/parameter.h"
#include "train/train_batch.h"

namespace vela {

struct TrainOptions {
  bool activation_checkpointing = false;
  float label_smoothing = 0.0f;
  int64_t ce_chunk_tokens = 4096;  // rows of the fused LM-head + CE chunk
  // LoRA fine-tuning (model/lora_adapter.h): the base is frozen (no gradients, no optimizer
  // state) and the parameters are the adapter's, initialized from lora_seed.
  bool lora = false;
  LoraConfig lora_config;
  uint64_t lora_seed = 0;
};

struct LossStats {
  double loss_sum = 0;   // sum of per-token losses (unscaled)
  int64_t n_tokens = 0;  // target tokens (targets != kIgnoreIndex)
  double mean() const { return n_tokens > 0 ? loss_sum / static_cast<double>(n_tokens) : 0.0; }
};

class TrainableModel {
 public:
  // Wraps `model` (which must outlive this object) and allocates one zeroed f32 gradient per
  // parameter on the model's device.
  TrainableModel(Transformer& model, const TrainOptions& opts);
  ~TrainableModel();
  TrainableModel(const TrainableModel&) = delete;
  TrainableModel& operator=(const TrainableModel&) = delete;

  // Fixed order: model.embed_tokens.weight, then per layer i (prefix model.layers.i.)
  //   input_layernorm.weight, self_attn.qkv_proj.weight, [self_attn.qkv_proj.bias],
  //   self_attn.o_proj.weight, [self_attn.o_proj.bias], [self_attn.q_norm.weight,
  //   self_attn.k_norm.weight], post_attention_layernorm.weight, mlp.gate_up_proj.weight,
  //   mlp.down_proj.weight (MoE layers instead: mlp.gate.weight, mlp.experts.gate_up_proj
  //   [E, 2I, H], mlp.experts.down_proj [E, H, I], [mlp.shared_expert.gate_up_proj.weight,
  //   mlp.shared_expert.down_proj.weight, mlp.shared_expert_gate.weight]),
  // then model.norm.weight and (untied only) lm_head.weight. A tied LM head has no parameter of
  // its own: its gradient lands in model.embed_tokens.weight.
  // With TrainOptions::lora: only the adapter's lora_A / lora_B tensors, by their PEFT names
  // (attach_lora_for_training's order); the base weights get no gradient.
  ParameterList& parameters() { return params_; }
  const ParameterList& parameters() const { return params_; }
  // The parameter called `name`, or nullptr.
  Parameter* find_parameter(const std::string& name);

  void zero_grad();

  // Data parallel (train/data_parallel.h): every backward (forward_backward and
  // forward_backward_logprobs) calls the hook with the indices of the
  // parameters whose gradients it has just finished (the LM head and final norm, then each block
  // from the last to the first, then the embedding), so their all-reduce can start while the rest
  // of the backward runs. backward_order() lists every parameter in that order (parameters no
  // hook reports come last, in index order).
  using GradReadyHook = std::function<void(const std::vector<size_t>& params)>;
  void set_grad_ready_hook(GradReadyHook hook) { grad_ready_hook_ = std::move(hook); }
  std::vector<size_t> backward_order() const;
  // LoRA dropout masks of the next forward_backward* calls derive from this seed (the trainer
  // sets it per micro-batch from the step, so a resumed run draws the same masks).
  void set_lora_dropout_seed(uint64_t seed) { lora_dropout_seed_ = seed; }
  bool lora() const { return opts_.lora; }

  // Forward + backward of (mean loss over the batch's target tokens) * loss_scale; gradients
  // accumulate into parameters()[i].grad. Returns the unscaled loss sum and target count. A batch
  // without target tokens returns {0, 0} and leaves the gradients untouched.
  LossStats forward_backward(const TrainBatch& batch, float loss_scale = 1.0f);
  // Forward only (no activations kept).
  LossStats evaluate(const TrainBatch& batch) const;

  // Per-token log p(targets[b, t]) under the current weights, [batch * seq] row-major, 0 where
  // the target is kIgnoreIndex (forward only; label smoothing does not apply). With a temperature
  // the log-probs of softmax(logits / temperature) (GRPO's sampling distribution).
  std::vector<float> token_logprobs(const TrainBatch& batch, float temperature = 1.0f) const;
  // Forward + backward of a loss L over the per-token log-probs (DPO, GRPO: train/logprob_head.h):
  // `dloss` gets logp ([batch * seq], as token_logprobs) and returns dL/dlogp per token (ignored
  // tokens' entries are not used). Gradients accumulate. Returns logp.
  using LogprobLossFn = std::function<std::vector<float>(const std::vector<float>& logp)>;
  std::vector<float> forward_backward_logprobs(const TrainBatch& batch, const LogprobLossFn& dloss,
                                               float temperature = 1.0f);
  // token_logprobs of any model (a frozen reference: no gradients are allocated).
  static std::vector<float> model_token_logprobs(const Transformer& model, const TrainBatch& batch,
                                                 int64_t chunk_rows = 4096,
                                                 float temperature = 1.0f);

  // MoE models: the router losses and per-layer expert loads of the forward_backward calls since
  // the last call (moe_losses.h MoeMetrics::take); an empty object for dense models.
  json take_moe_metrics() { return moe_metrics_.take(); }

  Transformer& model() { return model_; }
  const Transformer& model() const { return model_; }
  const TrainOptions& options() const { return opts_; }

 private:
  struct Prepared;  // the batch on the model's device: flat ids/targets, positions, rope table
  Prepared prepare(const TrainBatch& batch) const;
  static Prepared prepare_for(const Transformer& model, const TrainBatch& batch);
  // The forward every path shares. Inference-style (evaluate, the log-probs of a reference):
  // embedding -> blocks -> final norm, returns normed [n, hidden]. Training: the same with each
  // block saving what its backward needs; residual [batch, seq, hidden] (out) is the stream the
  // final norm read, which backward_train needs.
  static Tensor forward_normed(const Transformer& model, const Prepared& p);
  Tensor forward_train(const Prepared& p, Tensor& residual, std::vector<DecoderBlockSaved>& saved);
  // From d(normed) [n, hidden] back through the final norm, the blocks (freeing their saved
  // activations) and the embedding, accumulating the parameter gradients.
  void backward_train(const Prepared& p, const Tensor& residual, const Tensor& dnormed,
                      std::vector<DecoderBlockSaved>& saved);

  Transformer& model_;
  TrainOptions opts_;
  ParameterList params_;
  // The gradient tensors by role, aliasing params_[i].grad (f32), as the nn backward passes take
  // them.
  std::vector<DecoderBlockGrads> block_grads_;
  Tensor dembed_;       // [vocab, hidden]
  Tensor dfinal_norm_;  // [hidden]
  Tensor dlm_head_;     // [vocab, hidden]; the same storage as dembed_ when tied
  MoeMetrics moe_metrics_;
  uint64_t lora_dropout_seed_ = 0;
  GradReadyHook grad_ready_hook_;
  // Parameter indices by the backward step that finishes them: head (final norm, untied LM head),
  // blocks, embedding.
  std::vector<size_t> head_params_, embed_params_, other_params_;
  std::vector<std::vector<size_t>> layer_params_;
  void group_parameters();
  void grads_ready(const std::vector<size_t>& params) {
    if (grad_ready_hook_ && !params.empty()) grad_ready_hook_(params);
  }
};

}  // namespace vela
