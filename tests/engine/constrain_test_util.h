// Test helpers for constrained decoding through the Engine: a small tokenizer whose tokens are the
// printable ASCII characters, whitespace, a few JSON-shaped multi-character tokens and two
// non-ASCII ones (so masks cover merges and multi-byte characters), with an <eos> special token;
// and a random model over that vocabulary (near-uniform next-token distributions at T = 1: the
// hardest case for a mask, every allowed token gets sampled). Also a tokenizer for the 128-token
// CPU fixture model (fixtures/models/qwen3_qknorm, peaked distributions: speculation tests).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "engine/char_tokenizer.h"
#include "engine/engine.h"
#include "model/model_config.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace vela::test {

inline std::vector<std::string> json_test_tokens() {
  std::vector<std::string> t = {"<eos>"};
  for (int c = 32; c < 127; ++c) t.push_back(std::string(1, static_cast<char>(c)));
  for (const char* s :
       {"\n",   "\t",   "{\"",  "\":", "\",", "\"}",  "\": \"", "\", \"", "true", "false",
        "null", "  ",   "\n  ", "[\"", "\"]", "},",   "],",     "12",     "00",   "-1",
        ".5",   "name", "id",   "ing", "é",   "日本", "\\n",    "\\\""})
    t.push_back(s);
  return t;
}

// A merge-free BPE tokenizer over `toks` (token i = id i) whose token `eos_id` is the special
// <eos>: text encodes one character (or listed token) at a time.
inline std::unique_ptr<Tokenizer> bpe_test_tokenizer(const std::vector<std::string>& toks,
                                                     int eos_id) {
  json vocab = json::object();
  for (size_t i = 0; i < toks.size(); ++i) vocab[toks[i]] = static_cast<int>(i);
  json added = json::array({{{"id", eos_id},
                             {"content", "<eos>"},
                             {"single_word", false},
                             {"lstrip", false},
                             {"rstrip", false},
                             {"normalized", false},
                             {"special", true}}});
  return std::make_unique<Tokenizer>(Tokenizer::from_json(merge_free_bpe_json(vocab, added)));
}

inline std::unique_ptr<Tokenizer> json_test_tokenizer() {
  return bpe_test_tokenizer(json_test_tokens(), 0);
}

// A random Qwen3-shaped model over json_test_tokens() with <eos> (id 0) as EOS (also a draft
// model for json_test_engine(): the same seed is the same model).
inline Transformer json_test_model(uint64_t seed = 11) {
  const int vocab = static_cast<int>(json_test_tokens().size());
  ModelConfig mc = ModelConfig::from_json(json{{"model_type", "qwen3"},
                                               {"vocab_size", vocab},
                                               {"hidden_size", 32},
                                               {"intermediate_size", 64},
                                               {"num_hidden_layers", 2},
                                               {"num_attention_heads", 4},
                                               {"num_key_value_heads", 2},
                                               {"head_dim", 8},
                                               {"max_position_embeddings", 4096},
                                               {"rms_norm_eps", 1e-6},
                                               {"tie_word_embeddings", true},
                                               {"eos_token_id", 0}},
                                          "json_test_engine");
  return Transformer::random(mc, DType::kF32, Device::cpu(), seed, 0.02f);
}

// An engine over json_test_model(seed) and json_test_tokenizer().
inline std::unique_ptr<Engine> json_test_engine(EngineConfig cfg = {}, uint64_t seed = 11) {
  if (cfg.max_ctx <= 0) cfg.max_ctx = 2048;
  return std::make_unique<Engine>(json_test_model(seed), json_test_tokenizer(), cfg);
}

// For the fixture fixtures/models/qwen3_qknorm (vocab 128, EOS id 2): ids 0..94 are the printable
// ASCII characters 32..126, except id 2, the special <eos>; '"' is id 95 and ids 96..127 are
// multi-character JSON-shaped tokens (masks then span merges). BPE without merges encodes text
// one character per token.
inline std::vector<std::string> fixture_char_tokens() {
  std::vector<std::string> t;
  for (int c = 32; c < 127; ++c)
    t.push_back(c == 34 ? "<eos>" : std::string(1, static_cast<char>(c)));
  t.push_back("\"");
  for (const char* s :
       {"{\"", "\":", "\",", "\"}",  "\": \"", "\", \"", "true", "false", "null", "12",  "00",
        "ab",  "abc", "ba",  "name", "id",     "ing",    "  ",   "[\"",   "\"]",  "},",  "],",
        "aa",  "bb",  "xy",  "yes",  "no",     ", ",     ": ",   "\n",    "red",  "blue"})
    t.push_back(s);
  return t;
}

inline std::unique_ptr<Tokenizer> fixture_char_tokenizer() {
  return bpe_test_tokenizer(fixture_char_tokens(), 2);
}

}  // namespace vela::test
