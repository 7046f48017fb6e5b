// Small real tokenizers for engine tests: merge-free BPE over a given vocabulary (text encodes one
// listed token at a time), and over the engine fixtures' 128-token vocabulary with one printable
// character per token (ids 95.. are letters with their id appended, so every token decodes to
// distinct text): what tests use to check streamed text, stop strings and completions.
#pragma once

#include <memory>
#include <string>

#include "core/json.h"
#include "tokenizer/tokenizer.h"

namespace vela::test {

// tokenizer.json of a merge-free BPE model (`vocab`: token -> id) with `added` tokens.
inline json merge_free_bpe_json(const json& vocab, const json& added = json::array()) {
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", {{"type", "Fuse"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

inline std::unique_ptr<Tokenizer> char_tokenizer() {
  json vocab = json::object();
  for (int i = 0; i < 128; ++i) {
    char c = static_cast<char>(i < 95 ? 32 + i : 'A' + (i - 95) % 26);
    vocab[i < 95 ? std::string(1, c) : std::string(1, c) + std::to_string(i)] = i;
  }
  return std::make_unique<Tokenizer>(Tokenizer::from_json(merge_free_bpe_json(vocab)));
}

}  // namespace vela::test
