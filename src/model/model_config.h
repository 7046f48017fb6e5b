// ModelConfig: the architecture hyper-parameters of a decoder-only model, read from a Hugging Face
// config.json (model_type llama, mistral, qwen2, qwen3; transformers 4.x and 5.x dialects) or
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

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  // Parameter count (embeddings counted once when tied).
  int64_t n_params() const;

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
