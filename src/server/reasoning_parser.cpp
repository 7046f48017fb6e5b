// ReasoningParser state machine: kStart (waiting to see whether the output opens with <think>),
// kReasoning (until </think>), kContent (everything after).
#include "server/reasoning_parser.h"

#include <algorithm>

namespace vela {

namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
}  // namespace

size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  size_t max_len = std::min(text.size(), tag.size() - 1);
  for (size_t len = max_len; len > 0; --len)
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  return 0;
}

ReasoningParser::ReasoningParser(bool start_inside)
    : state_(start_inside ? State::kReasoning : State::kStart) {}

ReasoningParser::Delta ReasoningParser::push(std::string_view text) {
  pending_.append(text);
  Delta out;
  run(out, false);
  return out;
}

ReasoningParser::Delta ReasoningParser::finish() {
  Delta out;
  run(out, true);
  return out;
}

void ReasoningParser::run(Delta& out, bool final) {
  while (!pending_.empty()) {
    if (state_ == State::kStart) {
      size_t i = 0;
      while (i < pending_.size() && is_space(pending_[i])) ++i;
      std::string_view rest = std::string_view(pending_).substr(i);
      if (rest.substr(0, kOpen.size()) == kOpen) {
        pending_.erase(0, i + kOpen.size());
        state_ = State::kReasoning;
        continue;
      }
      if (!final && kOpen.substr(0, rest.size()) == rest) return;  // may still open
      state_ = State::kContent;
      continue;
    }
    if (state_ == State::kReasoning) {
      size_t pos = pending_.find(kClose);
      if (pos != std::string::npos) {
        out.reasoning += pending_.substr(0, pos);
        pending_.erase(0, pos + kClose.size());
        state_ = State::kContent;
        strip_leading_ = true;
        continue;
      }
      size_t hold = final ? 0 : partial_tag_suffix(pending_, kClose);
      out.reasoning += pending_.substr(0, pending_.size() - hold);
      pending_.erase(0, pending_.size() - hold);
      return;
    }
    // kContent
    if (strip_leading_) {
      size_t i = 0;
      while (i < pending_.size() && is_space(pending_[i])) ++i;
      pending_.erase(0, i);
      if (pending_.empty()) return;
      strip_leading_ = false;
    }
    out.content += pending_;
    pending_.clear();
  }
}

}  // namespace vela
