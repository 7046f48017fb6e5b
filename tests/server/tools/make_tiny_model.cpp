// make_tiny_model: writes a tiny random Qwen3 model whose vocabulary matches a real tokenizer, so
// the server's end-to-end tests run the real chat template and tokenizer against a model that
// answers in milliseconds. The tokenizer files are copied next to the weights.
//   usage: make_tiny_model TOKENIZER_DIR OUT_DIR [--max-context N] [--seed S]
// Random weights emit arbitrary tokens; tests steer them with logit_bias, seeds and max_tokens.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/json.h"
#include "model/model_config.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: make_tiny_model TOKENIZER_DIR OUT_DIR [--max-context N] [--seed S]\n");
    return 1;
  }
  namespace fs = std::filesystem;
  std::string tok_dir = argv[1], out = argv[2];
  int64_t max_ctx = 2048;
  uint64_t seed = 7;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--max-context")) max_ctx = std::stoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seed")) seed = std::stoull(argv[i + 1]);
  }
  try {
    vela::Tokenizer tok = vela::Tokenizer::from_file(tok_dir);
    vela::json eos = vela::json::array();
    // Qwen's end tokens; Llama 3.1's (generation_config: <|end_of_text|>, <|eom_id|>, <|eot_id|>).
    for (const char* name :
         {"<|im_end|>", "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"})
      if (auto id = tok.token_to_id(name)) eos.push_back(*id);
    vela::json cfg = {{"architectures", {"Qwen3ForCausalLM"}},
                      {"model_type", "qwen3"},
                      {"vocab_size", tok.vocab_size()},
                      {"hidden_size", 32},
                      {"intermediate_size", 64},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 8},
                      {"hidden_act", "silu"},
                      {"max_position_embeddings", max_ctx},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", 1000000.0},
                      {"tie_word_embeddings", true},
                      {"attention_bias", false},
                      {"eos_token_id", eos},
                      {"torch_dtype", "float32"}};
    vela::ModelConfig mc = vela::ModelConfig::from_json(cfg, "make_tiny_model");
    vela::Transformer model =
        vela::Transformer::random(mc, vela::DType::kF32, vela::Device::cpu(), seed, 0.02f);
    fs::create_directories(out);
    vela::save_model(model, out);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(fs::path(tok_dir) / f, fs::path(out) / f, fs::copy_options::overwrite_existing);
    std::printf("%s: vocab %d, context %lld\n", out.c_str(), tok.vocab_size(),
                static_cast<long long>(max_ctx));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_tiny_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
