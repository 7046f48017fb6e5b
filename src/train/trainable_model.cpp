// TrainableModel: parameter list + gradients, and the explicit training forward / backward.
#include "train/trainable_model.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "nn/lm_head_loss.h"
#include "ops/embedding.h"
#include "ops/rms_norm.h"
#include "train/logprob_head.h"

namespace vela {

struct TrainableModel::Prepared {
  int64_t batch = 0, seq = 0;
  Tensor ids;        // [batch * seq] i32 on the model's device
  Tensor targets;    // [batch * seq] i32 on the model's device
  Tensor doc_ids;    // [batch, seq] i32 on the model's device, or undefined
  Tensor positions;  // [batch * seq] i32 on the model's device
  Tensor rope_table;
  int64_t n_targets = 0;
  std::vector<int32_t> host_targets;  // [batch * seq]
};

namespace {

Tensor zeros_like_f32(const Tensor& t) { return Tensor::zeros(t.shape(), DType::kF32, t.device()); }

void check_batch_tensor(const char* name, const Tensor& t, int64_t b, int64_t s) {
  VELA_CHECK(t.dim() == 2 && t.size(0) == b && t.size(1) == s && t.dtype() == DType::kI32,
             "TrainBatch: ", name, " ", t.str(), " must be [", b, ", ", s, "] i32 like ids");
}

}  // namespace

TrainableModel::TrainableModel(Transformer& model, const TrainOptions& opts)
    : model_(model), opts_(opts) {
  VELA_CHECK(opts.ce_chunk_tokens > 0, "TrainOptions: ce_chunk_tokens must be positive, got ",
             opts.ce_chunk_tokens);
  VELA_CHECK(opts.label_smoothing >= 0.0f && opts.label_smoothing <= 1.0f,
             "TrainOptions: label_smoothing ", opts.label_smoothing, " must be in [0, 1]");
  VELA_CHECK(model.embed.defined() && !model.blocks.empty(),
             "TrainableModel: the model has no weights");
  VELA_CHECK(!model.device().is_cpu() || model.dtype() == DType::kF32,
             "TrainableModel: training on the CPU runs in f32, but the model was loaded as ",
             dtype_name(model.dtype()), " (load it with DType::kF32)");
  if (opts.lora) {
    // Frozen base: no gradient tensors at all (the nn backward passes skip undefined ones).
    block_grads_.resize(model.blocks.size());
    for (LoraParam& lp : attach_lora_for_training(model, opts.lora_config, opts.lora_seed)) {
      Parameter p;
      p.name = std::move(lp.name);
      p.value = lp.value;
      p.grad = lp.grad;
      p.kind = ParamKind::kMatrix;
      params_.push_back(std::move(p));
    }
    group_parameters();
    return;
  }
  auto add = [&](std::string name, const Tensor& value, ParamKind kind) -> Tensor {
    Parameter p;
    p.name = std::move(name);
    p.value = value;
    p.grad = zeros_like_f32(value);
    p.kind = kind;
    params_.push_back(std::move(p));
    return params_.back().grad;
  };
  dembed_ = add("model.embed_tokens.weight", model.embed, ParamKind::kEmbedding);
  block_grads_.resize(model.blocks.size());
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    const DecoderBlock& blk = model.blocks[l];
    DecoderBlockGrads& g = block_grads_[l];
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    g.dinput_norm = add(pre + "input_layernorm.weight", blk.input_norm, ParamKind::kNorm);
    g.attn.dqkv_weight =
        add(pre + "self_attn.qkv_proj.weight", blk.attn.qkv.weight, ParamKind::kMatrix);
    if (blk.attn.qkv.bias.defined())
      g.attn.dqkv_bias = add(pre + "self_attn.qkv_proj.bias", blk.attn.qkv.bias, ParamKind::kBias);
    g.attn.do_weight = add(pre + "self_attn.o_proj.weight", blk.attn.o.weight, ParamKind::kMatrix);
    if (blk.attn.o.bias.defined())
      g.attn.do_bias = add(pre + "self_attn.o_proj.bias", blk.attn.o.bias, ParamKind::kBias);
    if (blk.attn.q_norm.defined()) {
      g.attn.dq_norm = add(pre + "self_attn.q_norm.weight", blk.attn.q_norm, ParamKind::kNorm);
      g.attn.dk_norm = add(pre + "self_attn.k_norm.weight", blk.attn.k_norm, ParamKind::kNorm);
    }
    g.dpost_norm = add(pre + "post_attention_layernorm.weight", blk.post_norm, ParamKind::kNorm);
    if (blk.moe.defined()) {
      const Moe& moe = blk.moe;
      g.moe.drouter = add(pre + "mlp.gate.weight", moe.router.weight, ParamKind::kMatrix);
      g.moe.dgate_up = add(pre + "mlp.experts.gate_up_proj", moe.gate_up, ParamKind::kMatrix);
      g.moe.ddown = add(pre + "mlp.experts.down_proj", moe.down, ParamKind::kMatrix);
      if (moe.has_shared()) {
        g.moe.shared.dgate_up = add(pre + "mlp.shared_expert.gate_up_proj.weight",
                                    moe.shared.gate_up.weight, ParamKind::kMatrix);
        g.moe.shared.ddown = add(pre + "mlp.shared_expert.down_proj.weight", moe.shared.down.weight,
                                 ParamKind::kMatrix);
        g.moe.dshared_gate =
            add(pre + "mlp.shared_expert_gate.weight", moe.shared_gate.weight, ParamKind::kMatrix);
      }
      continue;
    }
    g.mlp.dgate_up =
        add(pre + "mlp.gate_up_proj.weight", blk.mlp.gate_up.weight, ParamKind::kMatrix);
    g.mlp.ddown = add(pre + "mlp.down_proj.weight", blk.mlp.down.weight, ParamKind::kMatrix);
  }
  dfinal_norm_ = add("model.norm.weight", model.final_norm, ParamKind::kNorm);
  const bool tied =
      model.config.tie_word_embeddings || model.lm_head.weight.data_ptr() == model.embed.data_ptr();
  dlm_head_ = tied ? dembed_ : add("lm_head.weight", model.lm_head.weight, ParamKind::kEmbedding);
  group_parameters();
}

void TrainableModel::group_parameters() {
  layer_params_.assign(model_.blocks.size(), {});
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& n = params_[i].name;
    const size_t at = n.find("layers.");
    if (at != std::string::npos) {
      size_t end = at + 7;
      while (end < n.size() && std::isdigit(static_cast<unsigned char>(n[end]))) ++end;
      if (end > at + 7 && end < n.size() && n[end] == '.') {
        const size_t l = std::stoul(n.substr(at + 7, end - at - 7));
        if (l < layer_params_.size()) {
          layer_params_[l].push_back(i);
          continue;
        }
      }
    }
    if (n == "model.embed_tokens.weight")
      embed_params_.push_back(i);
    else if (n == "model.norm.weight" || n == "lm_head.weight")
      head_params_.push_back(i);
    else
      other_params_.push_back(i);
  }
}

std::vector<size_t> TrainableModel::backward_order() const {
  std::vector<size_t> out(head_params_.rbegin(), head_params_.rend());
  for (size_t l = layer_params_.size(); l-- > 0;)
    out.insert(out.end(), layer_params_[l].rbegin(), layer_params_[l].rend());
  out.insert(out.end(), embed_params_.begin(), embed_params_.end());
  out.insert(out.end(), other_params_.begin(), other_params_.end());
  return out;
}

TrainableModel::~TrainableModel() = default;

Parameter* TrainableModel::find_parameter(const std::string& name) {
  for (Parameter& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

void TrainableModel::zero_grad() {
  for (Parameter& p : params_) p.grad.zero_();
}

TrainableModel::Prepared TrainableModel::prepare(const TrainBatch& batch) const {
  return prepare_for(model_, batch);
}

TrainableModel::Prepared TrainableModel::prepare_for(const Transformer& model_,
                                                     const TrainBatch& batch) {
  VELA_CHECK(batch.ids.defined() && batch.ids.dim() == 2 && batch.ids.dtype() == DType::kI32,
             "TrainBatch: ids must be [batch, seq] i32, got ",
             batch.ids.defined() ? batch.ids.str() : std::string("undefined"));
  Prepared p;
  p.batch = batch.ids.size(0);
  p.seq = batch.ids.size(1);
  VELA_CHECK(p.batch > 0 && p.seq > 0, "TrainBatch: empty ids ", batch.ids.str());
  VELA_CHECK(batch.targets.defined(), "TrainBatch: targets are undefined");
  check_batch_tensor("targets", batch.targets, p.batch, p.seq);
  const Device dev = model_.device();
  const int64_t n = p.batch * p.seq, vocab = model_.config.vocab_size;
  std::vector<int32_t> ids = batch.ids.to_vector<int32_t>();
  std::vector<int32_t> targets = batch.targets.to_vector<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    VELA_CHECK(ids[i] >= 0 && ids[i] < vocab, "TrainBatch: ids[", i / p.seq, ", ", i % p.seq,
               "] = ", ids[i], " is outside the vocabulary [0, ", vocab, ")");
    VELA_CHECK(targets[i] == kIgnoreIndex || (targets[i] >= 0 && targets[i] < vocab),
               "TrainBatch: targets[", i / p.seq, ", ", i % p.seq, "] = ", targets[i],
               " is neither a token of the vocabulary [0, ", vocab, ") nor kIgnoreIndex (",
               kIgnoreIndex, ")");
    p.n_targets += targets[i] != kIgnoreIndex;
  }
  VELA_CHECK(batch.n_target_tokens == 0 || batch.n_target_tokens == p.n_targets,
             "TrainBatch: n_target_tokens ", batch.n_target_tokens, " but targets hold ",
             p.n_targets, " non-ignored tokens");
  std::vector<int32_t> docs;
  if (batch.doc_ids.defined()) {
    check_batch_tensor("doc_ids", batch.doc_ids, p.batch, p.seq);
    docs = batch.doc_ids.to_vector<int32_t>();
    p.doc_ids = Tensor::from_vector(docs, {p.batch, p.seq}).to(dev);
  }
  std::vector<int32_t> pos;
  if (batch.positions.defined()) {
    check_batch_tensor("positions", batch.positions, p.batch, p.seq);
    pos = batch.positions.to_vector<int32_t>();
  } else {
    pos.resize(static_cast<size_t>(n));
    for (int64_t b = 0; b < p.batch; ++b) {
      int32_t q = 0;
      for (int64_t t = 0; t < p.seq; ++t) {
        const int64_t i = b * p.seq + t;
        if (!docs.empty() && t > 0 && docs[i] != docs[i - 1]) q = 0;
        pos[i] = q++;
      }
    }
  }
  int32_t max_pos = 0;
  for (int32_t v : pos) {
    VELA_CHECK(v >= 0, "TrainBatch: negative position ", v);
    max_pos = std::max(max_pos, v);
  }
  p.rope_table = model_.rope_table(max_pos + 1);
  p.ids = Tensor::from_vector(ids).to(dev);
  p.targets = Tensor::from_vector(targets).to(dev);
  p.positions = Tensor::from_vector(pos).to(dev);
  p.host_targets = std::move(targets);
  return p;
}

Tensor TrainableModel::forward_normed(const Transformer& model, const Prepared& p) {
  const int64_t n = p.batch * p.seq, hidden = model.config.hidden_size;
  const DType dt = model.dtype();
  const Device dev = model.device();
  Tensor residual = Tensor::empty({p.batch, p.seq, hidden}, dt, dev);  // [batch, seq, hidden]
  Tensor flat = residual.view({n, hidden});
  ops::embedding(model.embed, p.ids, flat);
  for (const DecoderBlock& block : model.blocks)
    block.forward_dense(residual, p.positions, p.rope_table, p.doc_ids);
  Tensor normed = Tensor::empty({n, hidden}, dt, dev);  // [n, hidden]
  ops::rms_norm(flat, model.final_norm, model.config.rms_norm_eps, normed);
  return normed;
}

Tensor TrainableModel::forward_train(const Prepared& p, Tensor& residual,
                                     std::vector<DecoderBlockSaved>& saved) {
  const int64_t n = p.batch * p.seq, hidden = model_.config.hidden_size;
  const DType dt = model_.dtype();
  const Device dev = model_.device();
  residual = Tensor::empty({p.batch, p.seq, hidden}, dt, dev);
  Tensor flat = residual.view({n, hidden});
  ops::embedding(model_.embed, p.ids, flat);
  saved.assign(model_.blocks.size(), DecoderBlockSaved{});
  for (size_t l = 0; l < model_.blocks.size(); ++l)
    model_.blocks[l].forward_dense_train(residual, p.positions, p.rope_table, p.doc_ids,
                                         opts_.activation_checkpointing, saved[l]);
  Tensor normed = Tensor::empty({n, hidden}, dt, dev);  // [n, hidden]
  ops::rms_norm(flat, model_.final_norm, model_.config.rms_norm_eps, normed);
  return normed;
}

void TrainableModel::backward_train(const Prepared& p, const Tensor& residual,
                                    const Tensor& dnormed, std::vector<DecoderBlockSaved>& saved) {
  const int64_t n = p.batch * p.seq, hidden = model_.config.hidden_size;
  const Tensor flat = residual.view({n, hidden});
  Tensor dresidual = Tensor::empty({p.batch, p.seq, hidden}, model_.dtype(), model_.device());
  Tensor dflat = dresidual.view({n, hidden});
  ops::rms_norm_backward(flat, model_.final_norm, model_.config.rms_norm_eps, dnormed, dflat,
                         dfinal_norm_);
  grads_ready(head_params_);
  for (size_t l = model_.blocks.size(); l-- > 0;) {
    model_.blocks[l].backward_dense(saved[l], p.positions, p.rope_table, p.doc_ids, dresidual,
                                    block_grads_[l]);
    saved[l] = DecoderBlockSaved{};  // free this block's activations
    grads_ready(layer_params_[l]);
  }
  if (dembed_.defined()) ops::embedding_backward(p.ids, dflat, dembed_);
  grads_ready(embed_params_);
}

LossStats TrainableModel::forward_backward(const TrainBatch& batch, float loss_scale) {
  Prepared p = prepare(batch);
  if (p.n_targets == 0) return {};
  const int64_t n = p.batch * p.seq, hidden = model_.config.hidden_size;
  std::optional<LoraDropoutScope> dropout;
  if (opts_.lora && opts_.lora_config.dropout > 0) dropout.emplace(lora_dropout_seed_);
  Tensor residual;
  std::vector<DecoderBlockSaved> saved;
  Tensor normed = forward_train(p, residual, saved);
  // MoE: the router losses couple every layer, so their gradients are known only now.
  const RouterLosses router =
      apply_router_losses(model_.config, saved, loss_scale, model_.device());
  moe_metrics_.add(saved, router);
  // Fused LM head + loss, backward through it.
  LmHeadLossOptions lo;
  lo.chunk_rows = opts_.ce_chunk_tokens;
  lo.label_smoothing = opts_.label_smoothing;
  lo.ignore_index = kIgnoreIndex;
  const float grad_scale = loss_scale / static_cast<float>(p.n_targets);
  Tensor dnormed = Tensor::empty({n, hidden}, model_.dtype(), model_.device());
  LmHeadLossResult loss =
      lm_head_loss(normed, model_.lm_head.weight, p.targets, lo, grad_scale, dnormed, dlm_head_);
  backward_train(p, residual, dnormed, saved);
  return {loss.loss_sum, loss.n_tokens};
}

LossStats TrainableModel::evaluate(const TrainBatch& batch) const {
  Prepared p = prepare(batch);
  if (p.n_targets == 0) return {};
  const Tensor normed = forward_normed(model_, p);
  LmHeadLossOptions lo;
  lo.chunk_rows = opts_.ce_chunk_tokens;
  lo.label_smoothing = opts_.label_smoothing;
  lo.ignore_index = kIgnoreIndex;
  Tensor none_dh, none_dw;
  LmHeadLossResult loss =
      lm_head_loss(normed, model_.lm_head.weight, p.targets, lo, 0.0f, none_dh, none_dw);
  return {loss.loss_sum, loss.n_tokens};
}

std::vector<float> TrainableModel::token_logprobs(const TrainBatch& batch,
                                                  float temperature) const {
  return model_token_logprobs(model_, batch, opts_.ce_chunk_tokens, temperature);
}

std::vector<float> TrainableModel::model_token_logprobs(const Transformer& model_,
                                                        const TrainBatch& batch, int64_t chunk_rows,
                                                        float temperature) {
  Prepared p = prepare_for(model_, batch);
  if (p.n_targets == 0) return std::vector<float>(static_cast<size_t>(p.batch * p.seq), 0.0f);
  const Tensor normed = forward_normed(model_, p);
  return lm_head_logprobs(normed, model_.lm_head.weight, p.targets, p.host_targets, chunk_rows,
                          kIgnoreIndex, temperature);
}

std::vector<float> TrainableModel::forward_backward_logprobs(const TrainBatch& batch,
                                                             const LogprobLossFn& dloss,
                                                             float temperature) {
  Prepared p = prepare(batch);
  const int64_t n = p.batch * p.seq, hidden = model_.config.hidden_size;
  if (p.n_targets == 0) return std::vector<float>(static_cast<size_t>(n), 0.0f);
  std::optional<LoraDropoutScope> dropout;  // forward and backward see the same masks
  if (opts_.lora && opts_.lora_config.dropout > 0) dropout.emplace(lora_dropout_seed_);
  Tensor residual;
  std::vector<DecoderBlockSaved> saved;
  Tensor normed = forward_train(p, residual, saved);
  std::vector<float> logp =
      lm_head_logprobs(normed, model_.lm_head.weight, p.targets, p.host_targets,
                       opts_.ce_chunk_tokens, kIgnoreIndex, temperature);
  std::vector<float> coef = dloss(logp);
  VELA_CHECK(coef.size() == logp.size(), "forward_backward_logprobs: the loss returned ",
             coef.size(), " coefficients for ", logp.size(), " tokens");
  Tensor dnormed = Tensor::empty({n, hidden}, model_.dtype(), model_.device());
  lm_head_logprobs_backward(normed, model_.lm_head.weight, p.targets, p.host_targets, coef,
                            opts_.ce_chunk_tokens, kIgnoreIndex, dnormed, dlm_head_, temperature);
  backward_train(p, residual, dnormed, saved);
  return logp;
}

}  // namespace vela
