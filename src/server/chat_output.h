// ChatOutputParser: the per-sample pipeline that turns engine text into what chat APIs return —
// reasoning (<think>), content, and tool calls — shared by the OpenAI and Anthropic front ends,
// streaming or not. Each push() returns the delta to send now; the accumulated totals are kept
// for non-streaming responses. Not thread-safe; one per sample.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/reasoning_parser.h"
#include "server/tool_call_dialect.h"
#include "server/tool_call_parser.h"

namespace vela {

struct ChatOutputOptions {
  bool reasoning = false;       // split <think> sections into reasoning
  bool reasoning_open = false;  // the prompt already opened <think>
  bool tools = false;           // parse tool calls, in this dialect's syntax:
  ToolCallDialect dialect = ToolCallDialect::kHermes;
  std::string forced_prefix;    // assistant text the prompt already contains (tool_choice)
  std::string id_prefix = "call_";
};

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(const ChatOutputOptions& opts);
  ChatDelta push(std::string_view text);
  ChatDelta finish();

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& tool_calls() const;

 private:
  ChatOutputOptions opts_;
  std::optional<ReasoningParser> reasoning_parser_;
  std::unique_ptr<ToolCallParser> tool_parser_;
  ChatDelta pending_;  // deltas produced by the forced prefix, sent with the first push
  std::string reasoning_, content_;
  std::string strip_;  // forced prefix still to be removed from returned content
  void route(const ReasoningParser::Delta& r, ChatDelta& out, bool final);
};

}  // namespace vela
