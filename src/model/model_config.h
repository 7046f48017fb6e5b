// ModelConfig: the architecture hyper-parameters of a decoder-only model, read from a Hugging Face
// config.json (model_type llama, mistral, qwen2, qwen3, and the mixture-of-experts qwen2_moe,
// qwen3_moe, mixtral; transformers 4.x and 5.x dialects) or
// vela's own checkpoints (model_type "vela", same keys). A field vela does not implement (sliding
// window in use, non-SiLU activation, unknown rope type, an unknown key) is an error naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/json.h"
#include "ops/rotary.h"

namespace vela {

struct ModelConfig {
  std::string model_type = "llama";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t n_layers = 0;
  int64_t intermediate_size = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;        // explicit, or hidden_size / n_heads
  bool qkv_bias = false;       // q/k/v projections carry a bias (qwen2; attention_bias elsewhere)
  bool o_bias = false;         // o_proj carries a bias (llama/qwen3 attention_bias)
  bool qk_norm = false;        // per-head RMSNorm on q and k before rotary (qwen3)
  bool tie_word_embeddings = false;
  float rms_norm_eps = 1e-6f;
  int64_t max_position_embeddings = 2048;
  ops::RopeConfig rope;        // rotary_dim, theta, scaling
  int32_t bos_token_id = -1;   // -1: none
  std::vector<int32_t> eos_token_ids;
  DType dtype = DType::kF32;   // the checkpoint's stored dtype (torch_dtype / dtype)

  // Mixture of experts (nn/moe.h); n_experts == 0: every layer is a dense MLP.
  int64_t n_experts = 0;                    // num_experts / num_local_experts
  int64_t n_experts_per_tok = 0;            // top-k
  int64_t moe_intermediate_size = 0;        // per expert (mixtral: intermediate_size)
  bool norm_topk_prob = false;              // renormalise the top-k weights (mixtral: always)
  int64_t decoder_sparse_step = 1;          // layer l is MoE when (l + 1) % step == 0 ...
  std::vector<int64_t> mlp_only_layers;     // ... and l is not listed here
  int64_t shared_expert_intermediate_size = 0;  // qwen2_moe: a gated shared expert (0: none)
  float router_aux_loss_coef = 0.0f;        // load-balancing loss weight (training)
  float router_z_loss_coef = 0.0f;          // router z-loss weight (training; vela extension)
  bool output_router_logits = false;        // HF adds the aux loss in training only when true

  bool is_moe() const { return n_experts > 0; }
  bool is_moe_layer(int64_t layer_idx) const;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  // Parameter count (embeddings counted once when tied).
  int64_t n_params() const;
  // Parameters one token's forward uses (MoE: only n_experts_per_tok experts; dense: n_params()).
  int64_t n_active_params() const;

  // Parses and validates; `source` names the file in error messages.
  static ModelConfig from_json(const json& j, const std::string& source = "config.json");
  // Reads `<dir>/config.json` (or the file itself).
  static ModelConfig from_file(const std::string& path);
  // The config.json that transformers reads back (4.x/5.x compatible: rope_theta + rope_scaling).
  json to_hf_json() const;
  // Checks internal consistency (divisibility, positive sizes); throws InvalidArgument.
  void validate(const std::string& source) const;
};

}  // namespace vela
