// Helpers for tokenizer unit tests: small handwritten tokenizer.json snippets.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace vela::test {

using tjson = nlohmann::json;

// The sub-pieces a pre-tokenizer cuts `text` into.
inline std::vector<std::string> pieces_of(const tjson& pre_tokenizer, const std::string& text) {
  auto p = PreTokenizer::from_json(pre_tokenizer);
  std::vector<std::string> out;
  for (auto& w : p->pre_tokenize_all({NormalizedText{text, true}})) out.push_back(w.text);
  return out;
}

// A byte-level BPE tokenizer whose vocab is the 256 byte symbols plus `extra` tokens and merges.
inline tjson byte_level_tokenizer(
    const std::vector<std::pair<std::string, std::string>>& merges = {}) {
  tjson vocab = tjson::object();
  int id = 0;
  const char* hex = "0123456789ABCDEF";
  (void)hex;
  // GPT-2 byte alphabet.
  std::vector<uint32_t> cps;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cps.push_back(printable ? b : 256 + n++);
  }
  for (uint32_t c : cps) {
    std::string s;
    if (c < 0x80)
      s += static_cast<char>(c);
    else {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
    vocab[s] = id++;
  }
  tjson m = tjson::array();
  for (auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = id++;
    m.push_back({a, b});
  }
  return {
      {"version", "1.0"},
      {"added_tokens", tjson::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
}

}  // namespace vela::test
