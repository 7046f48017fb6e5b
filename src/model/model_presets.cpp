// The built-in model presets.
#include "model/model_presets.h"

#include "core/error.h"

namespace vela {

json model_preset(const std::string& name) {
  if (name == "tiny")  // a few hundred thousand params: tests and smoke runs
    return json::parse(R"({"model_type": "llama", "vocab_size": 512, "hidden_size": 64,
      "num_hidden_layers": 2, "intermediate_size": 172, "num_attention_heads": 4,
      "num_key_value_heads": 2, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
      "rope_theta": 10000.0, "tie_word_embeddings": true})");
  if (name == "100m")  // ~110M params, GPT-2-small sized (bench/bench_model.cpp)
    return json::parse(R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 768,
      "num_hidden_layers": 12, "intermediate_size": 2048, "num_attention_heads": 12,
      "num_key_value_heads": 4, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
      "rope_theta": 10000.0, "tie_word_embeddings": true})");
  if (name == "bench-1b")  // ../shared/TARGETS.md, as bench/bench_model.cpp
    return json::parse(R"({"model_type": "llama", "vocab_size": 100000, "hidden_size": 1536,
      "num_hidden_layers": 24, "intermediate_size": 6912, "num_attention_heads": 24,
      "num_key_value_heads": 4, "head_dim": 64, "max_position_embeddings": 32768,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false})");
  VELA_THROW(InvalidArgument, "unknown model preset '", name,
             "' (tiny, 100m, bench-1b; or a config.json path)");
}

}  // namespace vela
