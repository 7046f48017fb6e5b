// ModelConfig parsing: both transformers dialects (4.x rope_theta/rope_scaling/torch_dtype, 5.x
// rope_parameters/dtype), strict about anything that changes the math.
#include "model/model_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"

namespace vela {
namespace {

// Keys that do not change inference or training math; anything else unknown is an error.
const std::set<std::string> kInertKeys = {
    "architectures", "transformers_version", "use_cache", "initializer_range", "attention_dropout",
    "pad_token_id", "_name_or_path", "output_hidden_states", "output_attentions", "return_dict",
    "is_encoder_decoder", "chunk_size_feed_forward", "id2label", "label2id", "problem_type",
    "tokenizer_class", "prefix", "sep_token_id", "decoder_start_token_id", "task_specific_params",
    "finetuning_task", "add_cross_attention", "cross_attention_hidden_size", "tie_encoder_decoder",
    "is_decoder", "pruned_heads", "torchscript", "use_bfloat16", "tf_legacy_loss", "auto_map",
    "max_window_layers", "embd_pdrop", "resid_pdrop", "vision_config", "torch_dtype", "dtype",
    "use_sliding_window", "sliding_window", "layer_types", "mlp_bias", "pretraining_tp",
    "hidden_act", "rope_scaling", "rope_theta", "rope_parameters", "partial_rotary_factor",
    "model_type", "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
    "num_attention_heads", "num_key_value_heads", "head_dim", "attention_bias", "qkv_bias",
    "qk_norm", "tie_word_embeddings", "rms_norm_eps", "max_position_embeddings", "bos_token_id",
    "eos_token_id", "output_router_logits", "_attn_implementation_autoset", "attn_implementation",
    // mixture of experts (parsed in parse_moe)
    "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
    "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "shared_expert_intermediate_size",
    "router_aux_loss_coef", "router_z_loss_coef", "router_jitter_noise"};

const std::set<std::string> kModelTypes = {"llama", "mistral",   "qwen2",   "qwen3",
                                           "vela",  "qwen2_moe", "qwen3_moe", "mixtral"};
const std::set<std::string> kMoeTypes = {"qwen2_moe", "qwen3_moe", "mixtral"};

template <typename T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

int64_t require_int(const json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  VELA_CHECK(it != j.end() && it->is_number_integer(), source, ": '", key,
             "' is missing or not an integer");
  return it->get<int64_t>();
}

void parse_rope(const json& j, ModelConfig& c, const std::string& source) {
  // 5.x: rope_parameters {rope_type, rope_theta, ...}; 4.x: rope_theta + rope_scaling {type|rope_type}.
  json params = json::object();
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    params = j["rope_parameters"];
    VELA_CHECK(params.is_object(), source, ": rope_parameters must be an object");
  } else if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    params = j["rope_scaling"];
    VELA_CHECK(params.is_object(), source, ": rope_scaling must be an object or null");
  }
  c.rope.theta = get_or<double>(params, "rope_theta", get_or<double>(j, "rope_theta", 10000.0));
  std::string type = "default";
  if (params.contains("rope_type")) type = params["rope_type"].get<std::string>();
  else if (params.contains("type")) type = params["type"].get<std::string>();
  try {
    c.rope.scaling.type = ops::RopeScaling::parse_type(type);
  } catch (const Error&) {
    VELA_THROW(Unsupported, source, ": rope type '", type,
               "' is not supported (default, linear, dynamic, yarn, llama3)");
  }
  static const std::set<std::string> kRopeKeys = {
      "rope_type", "type", "rope_theta", "factor", "original_max_position_embeddings",
      "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate",
      "low_freq_factor", "high_freq_factor", "partial_rotary_factor"};
  for (const auto& [k, v] : params.items())
    VELA_CHECK_T(Unsupported, kRopeKeys.count(k), source, ": rope field '", k, "' is not supported");
  auto& s = c.rope.scaling;
  s.factor = get_or<double>(params, "factor", 1.0);
  s.original_max_positions = get_or<int64_t>(params, "original_max_position_embeddings", 0);
  s.beta_fast = get_or<double>(params, "beta_fast", 32.0);
  s.beta_slow = get_or<double>(params, "beta_slow", 1.0);
  s.mscale = get_or<double>(params, "mscale", 0.0);
  s.mscale_all_dim = get_or<double>(params, "mscale_all_dim", 0.0);
  s.attention_factor = get_or<double>(params, "attention_factor", 0.0);
  s.truncate = get_or<bool>(params, "truncate", true);
  s.low_freq_factor = get_or<double>(params, "low_freq_factor", 1.0);
  s.high_freq_factor = get_or<double>(params, "high_freq_factor", 4.0);
  using T = ops::RopeScaling::Type;
  if (s.type != T::kNone)
    VELA_CHECK(s.factor > 0, source, ": rope scaling factor must be positive, got ", s.factor);
  if (s.type == T::kLlama3)
    VELA_CHECK(s.original_max_positions > 0, source,
               ": llama3 rope scaling needs original_max_position_embeddings");
  double partial = get_or<double>(params, "partial_rotary_factor",
                                  get_or<double>(j, "partial_rotary_factor", 1.0));
  VELA_CHECK(partial > 0 && partial <= 1, source, ": partial_rotary_factor must be in (0, 1]");
  c.rope.rotary_dim = static_cast<int64_t>(std::llround(c.head_dim * partial));
  VELA_CHECK(c.rope.rotary_dim % 2 == 0, source, ": rotary dim ", c.rope.rotary_dim, " is odd");
  c.rope.max_positions = c.max_position_embeddings;
}

// Mixture-of-experts fields. Hub checkpoints say num_experts (qwen*_moe) or num_local_experts
// (mixtral); transformers 5 may write either, so both are read for every type. Mixtral's experts
// are intermediate_size wide and always renormalise their top-k weights.
void parse_moe(const json& j, ModelConfig& c, const std::string& source) {
  const bool moe_type = kMoeTypes.count(c.model_type) > 0;
  int64_t n = get_or<int64_t>(j, "num_experts", get_or<int64_t>(j, "num_local_experts", 0));
  if (!moe_type) {
    VELA_CHECK_T(Unsupported, n == 0, source, ": model_type '", c.model_type,
                 "' with experts is not supported (use qwen2_moe, qwen3_moe or mixtral)");
    return;
  }
  VELA_CHECK(n > 0, source, ": ", c.model_type, " needs num_experts (or num_local_experts) > 0");
  c.n_experts = n;
  c.n_experts_per_tok = get_or<int64_t>(j, "num_experts_per_tok", 2);
  VELA_CHECK(c.n_experts_per_tok >= 1 && c.n_experts_per_tok <= n, source,
             ": num_experts_per_tok = ", c.n_experts_per_tok, " must be in [1, ", n, "]");
  if (c.model_type == "mixtral") {
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;
  } else {
    c.moe_intermediate_size = require_int(j, "moe_intermediate_size", source);
    c.norm_topk_prob = get_or<bool>(j, "norm_topk_prob", false);
    c.decoder_sparse_step = get_or<int64_t>(j, "decoder_sparse_step", 1);
    if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null())
      c.mlp_only_layers = j["mlp_only_layers"].get<std::vector<int64_t>>();
  }
  VELA_CHECK(c.moe_intermediate_size > 0, source, ": the expert intermediate size must be positive");
  VELA_CHECK(c.decoder_sparse_step >= 1, source, ": decoder_sparse_step must be >= 1, got ",
             c.decoder_sparse_step);
  if (c.model_type == "qwen2_moe")
    c.shared_expert_intermediate_size = get_or<int64_t>(j, "shared_expert_intermediate_size", 0);
  else
    VELA_CHECK_T(Unsupported, get_or<int64_t>(j, "shared_expert_intermediate_size", 0) == 0, source,
                 ": a shared expert is only read for qwen2_moe");
  VELA_CHECK(c.shared_expert_intermediate_size >= 0, source,
             ": shared_expert_intermediate_size must be >= 0");
  c.router_aux_loss_coef = static_cast<float>(get_or<double>(j, "router_aux_loss_coef", 0.001));
  c.router_z_loss_coef = static_cast<float>(get_or<double>(j, "router_z_loss_coef", 0.0));
  c.output_router_logits = get_or<bool>(j, "output_router_logits", false);
  VELA_CHECK(c.router_aux_loss_coef >= 0 && c.router_z_loss_coef >= 0, source,
             ": router_aux_loss_coef and router_z_loss_coef must be >= 0");
  // Jitter multiplies router inputs by random noise in training only; vela does not implement it.
  VELA_CHECK_T(Unsupported, get_or<double>(j, "router_jitter_noise", 0.0) == 0.0, source,
               ": router_jitter_noise > 0 is not supported");
}

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer_idx) const {
  if (n_experts <= 0) return false;
  for (int64_t l : mlp_only_layers)
    if (l == layer_idx) return false;
  return (layer_idx + 1) % decoder_sparse_step == 0;
}

namespace {

// Parameters counting n_expert_mlps experts per MoE layer (the router and the shared expert
// always count; embeddings once when tied).
int64_t count_params(const ModelConfig& c, int64_t n_expert_mlps) {
  const int64_t h = c.hidden_size;
  int64_t attn = h * c.q_dim() + 2 * h * c.kv_dim() + c.q_dim() * h;
  if (c.qkv_bias) attn += c.q_dim() + 2 * c.kv_dim();
  if (c.o_bias) attn += h;
  if (c.qk_norm) attn += 2 * c.head_dim;
  const int64_t dense_mlp = 3 * h * c.intermediate_size;
  int64_t moe_mlp = n_expert_mlps * 3 * h * c.moe_intermediate_size + c.n_experts * h;
  if (c.shared_expert_intermediate_size > 0)
    moe_mlp += 3 * h * c.shared_expert_intermediate_size + h;
  int64_t total = 0;
  for (int64_t l = 0; l < c.n_layers; ++l)
    total += attn + (c.is_moe_layer(l) ? moe_mlp : dense_mlp) + 2 * h;
  const int64_t emb = c.vocab_size * h * (c.tie_word_embeddings ? 1 : 2);
  return total + emb + h;
}

}  // namespace

int64_t ModelConfig::n_params() const { return count_params(*this, n_experts); }

int64_t ModelConfig::n_active_params() const {
  return count_params(*this, n_experts > 0 ? n_experts_per_tok : 0);
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& source) {
  VELA_CHECK(j.is_object(), source, ": config must be a JSON object");
  for (const auto& [k, v] : j.items())
    VELA_CHECK_T(Unsupported, kInertKeys.count(k), source, ": config field '", k,
                 "' is not supported by vela");
  ModelConfig c;
  c.model_type = get_or<std::string>(j, "model_type", "");
  VELA_CHECK_T(Unsupported, kModelTypes.count(c.model_type), source, ": model_type '",
               c.model_type,
               "' is not supported (llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, mixtral, "
               "vela)");
  try {
    c.vocab_size = require_int(j, "vocab_size", source);
    c.hidden_size = require_int(j, "hidden_size", source);
    c.n_layers = require_int(j, "num_hidden_layers", source);
    c.intermediate_size = require_int(j, "intermediate_size", source);
    c.n_heads = require_int(j, "num_attention_heads", source);
    c.n_kv_heads = get_or<int64_t>(j, "num_key_value_heads", c.n_heads);
    VELA_CHECK(c.n_heads > 0, source, ": num_attention_heads must be positive");
    c.head_dim = get_or<int64_t>(j, "head_dim", c.hidden_size / c.n_heads);
    c.rms_norm_eps = static_cast<float>(get_or<double>(j, "rms_norm_eps", 1e-6));
    c.max_position_embeddings = get_or<int64_t>(j, "max_position_embeddings", 2048);
    c.tie_word_embeddings = get_or<bool>(j, "tie_word_embeddings", false);
    bool attention_bias = get_or<bool>(j, "attention_bias", false);
    if (c.model_type == "qwen2" || c.model_type == "qwen2_moe") {
      c.qkv_bias = true;  // Qwen2 always has q/k/v biases and no o_proj bias
      c.o_bias = false;
    } else if (c.model_type == "vela") {
      c.qkv_bias = get_or<bool>(j, "qkv_bias", attention_bias);
      c.o_bias = attention_bias;
    } else {
      c.qkv_bias = c.o_bias = attention_bias;
    }
    c.qk_norm = c.model_type == "qwen3" || c.model_type == "qwen3_moe" ||
                get_or<bool>(j, "qk_norm", false);

    std::string act = get_or<std::string>(j, "hidden_act", "silu");
    VELA_CHECK_T(Unsupported, act == "silu", source, ": hidden_act '", act,
                 "' is not supported (only silu / SwiGLU)");
    VELA_CHECK_T(Unsupported, !get_or<bool>(j, "mlp_bias", false), source,
                 ": mlp_bias=true is not supported");
    VELA_CHECK_T(Unsupported, get_or<int64_t>(j, "pretraining_tp", 1) == 1, source,
                 ": pretraining_tp != 1 is not supported");
    // Sliding-window attention: only an error when it is actually in use.
    bool use_sw = get_or<bool>(j, "use_sliding_window",
                              c.model_type == "mistral" || c.model_type == "mixtral");
    if (j.contains("sliding_window") && !j["sliding_window"].is_null() && use_sw) {
      int64_t sw = j["sliding_window"].get<int64_t>();
      VELA_CHECK_T(Unsupported, sw >= c.max_position_embeddings, source, ": sliding_window=", sw,
                   " is in use (< max_position_embeddings) and not supported");
    }
    if (j.contains("layer_types") && j["layer_types"].is_array()) {
      for (const auto& t : j["layer_types"])
        VELA_CHECK_T(Unsupported, t == "full_attention", source, ": layer_types contains '",
                     t.get<std::string>(), "' (only full_attention is supported)");
    }
    parse_rope(j, c, source);
    parse_moe(j, c, source);
    c.bos_token_id = get_or<int32_t>(j, "bos_token_id", -1);
    if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
      const json& e = j["eos_token_id"];
      if (e.is_array()) {
        for (const auto& x : e) c.eos_token_ids.push_back(x.get<int32_t>());
      } else {
        c.eos_token_ids.push_back(e.get<int32_t>());
      }
    }
    std::string dt = get_or<std::string>(j, "dtype", get_or<std::string>(j, "torch_dtype", "float32"));
    c.dtype = parse_dtype(dt);
  } catch (const nlohmann::json::exception& e) {
    VELA_THROW(InvalidArgument, source, ": malformed config field: ", e.what());
  }
  c.validate(source);
  return c;
}

void ModelConfig::validate(const std::string& source) const {
  VELA_CHECK(vocab_size > 0 && hidden_size > 0 && n_layers > 0 && intermediate_size > 0, source,
             ": vocab_size, hidden_size, num_hidden_layers and intermediate_size must be positive");
  VELA_CHECK(n_kv_heads > 0 && n_heads % n_kv_heads == 0, source, ": num_attention_heads (",
             n_heads, ") must be a multiple of num_key_value_heads (", n_kv_heads, ")");
  VELA_CHECK(head_dim > 0 && head_dim % 2 == 0, source, ": head_dim must be positive and even, got ",
             head_dim);
  VELA_CHECK(rms_norm_eps > 0, source, ": rms_norm_eps must be positive");
  VELA_CHECK(max_position_embeddings > 0, source, ": max_position_embeddings must be positive");
  for (int32_t e : eos_token_ids)
    VELA_CHECK(e >= 0 && e < vocab_size, source, ": eos_token_id ", e, " outside the vocabulary");
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (fs::is_directory(p)) p /= "config.json";
  std::ifstream f(p);
  VELA_CHECK_T(IoError, f.good(), "cannot open model config '", p.string(), "'");
  json j;
  try {
    j = json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    VELA_THROW(InvalidArgument, p.string(), ": invalid JSON: ", e.what());
  }
  return from_json(j, p.string());
}

json ModelConfig::to_hf_json() const {
  static const std::vector<std::pair<std::string, std::string>> kArch = {
      {"llama", "LlamaForCausalLM"},         {"mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"},         {"qwen3", "Qwen3ForCausalLM"},
      {"qwen2_moe", "Qwen2MoeForCausalLM"}, {"qwen3_moe", "Qwen3MoeForCausalLM"},
      {"mixtral", "MixtralForCausalLM"}};
  std::string mt = model_type == "vela" ? "llama" : model_type;
  std::string arch = "LlamaForCausalLM";
  for (const auto& [t, a] : kArch)
    if (t == mt) arch = a;
  json j;
  j["architectures"] = {arch};
  j["model_type"] = mt;
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = n_layers;
  j["intermediate_size"] = intermediate_size;
  j["num_attention_heads"] = n_heads;
  j["num_key_value_heads"] = n_kv_heads;
  j["head_dim"] = head_dim;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = rms_norm_eps;
  j["max_position_embeddings"] = max_position_embeddings;
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (mt != "qwen2" && mt != "qwen2_moe") j["attention_bias"] = o_bias || qkv_bias;
  if (mt == "mistral" || mt == "mixtral") j["sliding_window"] = nullptr;
  if (mt == "qwen2" || mt == "qwen3" || mt == "qwen2_moe" || mt == "qwen3_moe")
    j["use_sliding_window"] = false;
  if (n_experts > 0) {
    j[mt == "mixtral" ? "num_local_experts" : "num_experts"] = n_experts;
    j["num_experts_per_tok"] = n_experts_per_tok;
    j["router_aux_loss_coef"] = router_aux_loss_coef;
    if (router_z_loss_coef > 0) j["router_z_loss_coef"] = router_z_loss_coef;
    j["output_router_logits"] = output_router_logits;
    if (mt != "mixtral") {
      j["moe_intermediate_size"] = moe_intermediate_size;
      j["norm_topk_prob"] = norm_topk_prob;
      j["decoder_sparse_step"] = decoder_sparse_step;
      j["mlp_only_layers"] = mlp_only_layers;
    }
    if (mt == "qwen2_moe") j["shared_expert_intermediate_size"] = shared_expert_intermediate_size;
  }
  j["rope_theta"] = rope.theta;
  using T = ops::RopeScaling::Type;
  const auto& s = rope.scaling;
  if (s.type == T::kNone) {
    j["rope_scaling"] = nullptr;
  } else {
    json r;
    static const char* kNames[] = {"default", "linear", "dynamic", "yarn", "llama3"};
    r["rope_type"] = kNames[static_cast<int>(s.type)];
    r["factor"] = s.factor;
    if (s.original_max_positions > 0) r["original_max_position_embeddings"] = s.original_max_positions;
    if (s.type == T::kYarn) {
      r["beta_fast"] = s.beta_fast;
      r["beta_slow"] = s.beta_slow;
      if (s.mscale != 0) r["mscale"] = s.mscale;
      if (s.mscale_all_dim != 0) r["mscale_all_dim"] = s.mscale_all_dim;
      if (s.attention_factor != 0) r["attention_factor"] = s.attention_factor;
      if (!s.truncate) r["truncate"] = false;
    }
    if (s.type == T::kLlama3) {
      r["low_freq_factor"] = s.low_freq_factor;
      r["high_freq_factor"] = s.high_freq_factor;
    }
    j["rope_scaling"] = r;
  }
  if (rope.rotary_dim != head_dim)
    j["partial_rotary_factor"] = static_cast<double>(rope.rotary_dim) / static_cast<double>(head_dim);
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  else if (!eos_token_ids.empty()) j["eos_token_id"] = eos_token_ids;
  j["torch_dtype"] = dtype == DType::kBF16 ? "bfloat16" : dtype == DType::kF16 ? "float16" : "float32";
  return j;
}

}  // namespace vela
