// ChatOutputParser: reasoning first (tool calls come after </think>), then tool calls in content.
#include "server/chat_output.h"

namespace vela {

namespace {
const std::vector<ToolCall> kNoCalls;

void append(ChatDelta& into, ChatDelta&& d) {
  into.reasoning += d.reasoning;
  into.content += d.content;
  for (auto& c : d.calls) into.calls.push_back(std::move(c));
}
}  // namespace

ChatOutputParser::ChatOutputParser(const ChatOutputOptions& opts) : opts_(opts) {
  if (opts_.reasoning && opts_.forced_prefix.empty())
    reasoning_parser_.emplace(opts_.reasoning_open);
  if (opts_.tools) tool_parser_ = make_tool_call_parser(opts_.dialect, opts_.id_prefix);
  if (!opts_.forced_prefix.empty()) {
    ChatDelta d = push(opts_.forced_prefix);
    strip_ = opts_.forced_prefix;
    // The prefix is prompt text: its content is not output, its tool-call announcement is.
    d.content.clear();
    content_.clear();
    pending_ = std::move(d);
  }
}

const std::vector<ToolCall>& ChatOutputParser::tool_calls() const {
  return tool_parser_ ? tool_parser_->calls() : kNoCalls;
}

void ChatOutputParser::route(const ReasoningParser::Delta& r, ChatDelta& out, bool final) {
  out.reasoning += r.reasoning;
  reasoning_ += r.reasoning;
  if (tool_parser_) {
    ToolCallParser::Delta t = tool_parser_->push(r.content);
    if (final) {
      ToolCallParser::Delta f = tool_parser_->finish();
      t.content += f.content;
      for (auto& c : f.calls) t.calls.push_back(std::move(c));
    }
    if (!strip_.empty()) {
      // A forced call that did not parse comes back as text: drop the prompt's part of it.
      size_t k = 0;
      while (k < strip_.size() && k < t.content.size() && strip_[k] == t.content[k]) ++k;
      t.content.erase(0, k);
      strip_.erase(0, k);
    }
    out.content += t.content;
    for (auto& c : t.calls) out.calls.push_back(std::move(c));
    content_ += t.content;
  } else {
    out.content += r.content;
    content_ += r.content;
  }
}

ChatDelta ChatOutputParser::push(std::string_view text) {
  ChatDelta out = std::move(pending_);
  pending_ = ChatDelta();
  ReasoningParser::Delta r;
  if (reasoning_parser_) {
    r = reasoning_parser_->push(text);
  } else {
    r.content = std::string(text);
  }
  ChatDelta d;
  route(r, d, false);
  append(out, std::move(d));
  return out;
}

ChatDelta ChatOutputParser::finish() {
  ChatDelta out = std::move(pending_);
  pending_ = ChatDelta();
  ReasoningParser::Delta r;
  if (reasoning_parser_) r = reasoning_parser_->finish();
  ChatDelta d;
  route(r, d, true);
  append(out, std::move(d));
  return out;
}

}  // namespace vela
