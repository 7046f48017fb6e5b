// ToolCallParser: the interface of the streaming tool-call extractors, one per tool-call dialect
// (tool_call_dialect.h): HermesToolCallParser (`<tool_call>` blocks, Qwen / Hermes) and
// Llama3JsonToolCallParser (a bare JSON call, Llama 3.x). Each turns streamed model text into
// content plus tool calls: a call is announced as soon as its name is complete and its arguments
// stream as raw JSON text; the concatenation of all argument deltas equals the final arguments
// string. Text that does not parse as a call is returned as content, so no model output is lost.
// Implementations are not thread-safe; one per sample.
#pragma once

#include <cstdint>
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

  virtual ~ToolCallParser() = default;
  // The next piece of model text: buffered, then scanned by the dialect's run().
  Delta push(std::string_view text);
  // End of the sample: an unterminated call is closed if it parses, else returned as content.
  virtual Delta finish() = 0;
  const std::vector<ToolCall>& calls() const { return calls_; }

 protected:
  // `id_prefix` starts every call id ("call_" or "toolu_").
  explicit ToolCallParser(std::string id_prefix) : id_prefix_(std::move(id_prefix)) {}
  std::string new_id() const;  // id_prefix + 24 random alphanumerics
  // Scans buf_ as far as it can (`final`: the sample has ended), appending to `out`.
  virtual void run(Delta& out, bool final) = 0;

  // The call being parsed, as every dialect streams it: announced once its name is read, then its
  // arguments object streamed as raw text from buf_[args_begin_, ...).
  void start_call();                                // forget the previous call's state
  void announce(Delta& out, std::string name);      // the first delta: id and name
  void send_arguments(Delta& out, size_t end);      // buf_[args_sent_, end) as arguments text
  // The call is complete with `args` (its whole arguments text): the last delta (the whole call
  // when it was never announced; else what streaming has not sent) and the entry in calls().
  void complete_call(Delta& out, const std::string& name, const std::string& args);

  std::string id_prefix_;
  std::string buf_;  // text not yet emitted (what it holds is the dialect's state)
  std::vector<ToolCall> calls_;
  bool header_sent_ = false;   // the current call was announced
  bool stream_args_ = false;   // its arguments are an object streaming as raw text
  bool args_located_ = false;  // the scan for the arguments' start is over
  size_t args_begin_ = 0;      // offset of the arguments value in buf_
  size_t args_sent_ = 0;       // offset in buf_ up to which arguments were sent
  std::string name_, id_;
};

}  // namespace vela
