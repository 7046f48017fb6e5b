// ToolCallParser: extracts Hermes / Qwen tool calls — `<tool_call>\n{"name": ..., "arguments":
// {...}}\n</tool_call>` — from streamed model text, as vLLM's hermes parser does. Text outside the
// tags is content. While streaming, a call is announced as soon as its name is complete and its
// arguments stream as raw JSON text; the concatenation of all argument deltas equals the final
// arguments string. A block that is not valid JSON (or lacks a name) is returned as content, so
// no model output is lost. Not thread-safe; one per sample.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace vela {

struct ToolCall {
  std::string id;  // "call_..." (OpenAI) — the API layer may rename it
  std::string name;
  std::string arguments;  // a JSON text (an object for well-behaved models)
};

struct ToolCallDelta {
  int32_t index = 0;
  bool start = false;  // first delta of this call: id and name are set
  std::string id, name;
  std::string arguments;  // the next piece of the arguments text
};

class ToolCallParser {
 public:
  struct Delta {
    std::string content;
    std::vector<ToolCallDelta> calls;
    bool empty() const { return content.empty() && calls.empty(); }
  };

  // `id_prefix` starts every call id ("call_" or "toolu_").
  explicit ToolCallParser(std::string id_prefix = "call_");
  Delta push(std::string_view text);
  // End of the sample: an unterminated call is closed if it parses, else returned as content.
  Delta finish();

  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class State { kText, kCall };
  std::string id_prefix_;
  State state_ = State::kText;
  std::string buf_;            // kText: undecided text; kCall: the call's body so far
  bool header_sent_ = false;   // the current call's name was announced
  bool stream_args_ = false;   // arguments stream as raw text (an object after "name")
  bool args_located_ = false;  // the scan for the arguments' start is over
  size_t name_end_ = 0;        // offset just past the name string
  size_t args_begin_ = 0;      // offset of the arguments value in buf_
  size_t args_sent_ = 0;       // bytes of arguments already emitted
  std::string name_, id_;
  std::vector<ToolCall> calls_;

  void run(Delta& out, bool final);
  void scan_header(Delta& out);
  void stream_arguments(Delta& out);
  void close_call(Delta& out, std::string_view body, bool terminated);
  std::string new_id();
};

}  // namespace vela
