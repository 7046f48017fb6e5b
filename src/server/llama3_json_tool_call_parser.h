// Llama3JsonToolCallParser: extracts Llama 3.1 / 3.2 / 3.3 JSON tool calls from streamed model
// text, as vLLM's llama3_json parser does: the whole reply is the call(s) —
//   [<|python_tag|>]{"name": "fn", "parameters": {...}}[; {"name": ..., "parameters": ...}]...
// ("arguments" is accepted for "parameters"; whitespace around ';' is allowed, and so is a
// newline instead of it). A reply whose first non-whitespace text is not '{' or <|python_tag|>
// is content, streamed at once. A call is announced when `{"name": "...", "parameters": ` has
// been read; an object that is not valid JSON or lacks "name" / "parameters" is returned as
// content with everything after it, so no model output is lost. Text after the last call is
// content too. Not thread-safe; one per sample.
#pragma once

#include <string>
#include <string_view>

#include "server/tool_call_parser.h"

namespace vela {

class Llama3JsonToolCallParser : public ToolCallParser {
 public:
  explicit Llama3JsonToolCallParser(std::string id_prefix = "call_");
  Delta finish() override;

 private:
  // Where one JSON value that opens at the first fed byte ends; strings are skipped.
  struct ValueScanner {
    size_t pos = 0;  // bytes of the buffer scanned (offsets are buf_ offsets)
    int depth = 0;
    bool in_string = false, escape = false;
    size_t end = std::string::npos;  // one past the value's closing bracket, once seen
    void feed(std::string_view buf);
  };
  enum class State { kStart, kCall, kBetween, kText };
  State state_ = State::kStart;
  // buf_ (the base's): kStart / kBetween: undecided text; kCall: the call object so far
  std::string lead_;     // consumed text before the call (whitespace, tag, ';'): content on failure
  ValueScanner object_;  // the call object in buf_
  ValueScanner args_;    // its arguments object (valid once stream_args_)

  void run(Delta& out, bool final) override;
  void begin_call();
  void scan_header(Delta& out);
  void stream_arguments(Delta& out);
  // The object buf_[0, end) is complete (or, at the end of the sample, cut off): a call or content.
  bool close_call(Delta& out, std::string_view body);
};

}  // namespace vela
