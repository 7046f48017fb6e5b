// A real Tokenizer over the engine fixtures' 128-token vocabulary, one printable character per
// token (ids 95.. are letters with their id appended, so every token decodes to distinct text):
// what engine tests use to check streamed text, stop strings and completions.
#pragma once

#include <memory>
#include <string>

#include "core/json.h"
#include "tokenizer/tokenizer.h"

namespace vela::test {

inline std::unique_ptr<Tokenizer> char_tokenizer() {
  json vocab = json::object();
  for (int i = 0; i < 128; ++i) {
    char c = static_cast<char>(i < 95 ? 32 + i : 'A' + (i - 95) % 26);
    std::string tok = i < 95 ? std::string(1, c) : std::string(1, c) + std::to_string(i);
    vocab[tok] = i;
  }
  json tj = {{"version", "1.0"},
             {"added_tokens", json::array()},
             {"normalizer", nullptr},
             {"pre_tokenizer", nullptr},
             {"post_processor", nullptr},
             {"decoder", {{"type", "Fuse"}}},
             {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
  return std::make_unique<Tokenizer>(Tokenizer::from_json(tj));
}

}  // namespace vela::test
