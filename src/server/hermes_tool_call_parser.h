// HermesToolCallParser: extracts Hermes / Qwen tool calls — `<tool_call>\n{"name": ...,
// "arguments": {...}}\n</tool_call>` — from streamed model text, as vLLM's hermes parser does.
// Text outside the tags is content. A block that is not valid JSON (or lacks a name) is returned
// as content. Not thread-safe; one per sample.
#pragma once

#include <string>
#include <string_view>

#include "server/tool_call_parser.h"

namespace vela {

class HermesToolCallParser : public ToolCallParser {
 public:
  explicit HermesToolCallParser(std::string id_prefix = "call_");
  Delta finish() override;

 private:
  enum class State { kText, kCall };
  State state_ = State::kText;
  // buf_ (the base's): kText: undecided text; kCall: the call's body so far
  size_t name_end_ = 0;  // offset just past the name string

  void run(Delta& out, bool final) override;
  void scan_header(Delta& out);
  void stream_arguments(Delta& out);
  void close_call(Delta& out, std::string_view body, bool terminated);
};

}  // namespace vela
