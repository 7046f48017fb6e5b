// ToolCallParser: what every dialect's parser shares: buffering pushed text, call ids, and the
// deltas of a call as it is announced, streamed and completed.
#include "server/tool_call_parser.h"

#include <random>

namespace vela {

ToolCallParser::Delta ToolCallParser::push(std::string_view text) {
  buf_.append(text);
  Delta out;
  run(out, false);
  return out;
}

void ToolCallParser::start_call() {
  header_sent_ = stream_args_ = args_located_ = false;
  args_begin_ = args_sent_ = 0;
  name_.clear();
  id_.clear();
}

void ToolCallParser::announce(Delta& out, std::string name) {
  name_ = std::move(name);
  id_ = new_id();
  header_sent_ = true;
  ToolCallDelta d;
  d.index = static_cast<int32_t>(calls_.size());
  d.start = true;
  d.id = id_;
  d.name = name_;
  out.calls.push_back(std::move(d));
}

void ToolCallParser::send_arguments(Delta& out, size_t end) {
  if (end <= args_sent_) return;
  ToolCallDelta d;
  d.index = static_cast<int32_t>(calls_.size());
  d.arguments = buf_.substr(args_sent_, end - args_sent_);
  args_sent_ = end;
  out.calls.push_back(std::move(d));
}

void ToolCallParser::complete_call(Delta& out, const std::string& name, const std::string& args) {
  ToolCallDelta d;
  d.index = static_cast<int32_t>(calls_.size());
  if (!header_sent_) {
    id_ = new_id();
    name_ = name;
    d.start = true;
    d.id = id_;
    d.name = name_;
    d.arguments = args;
  } else if (stream_args_) {
    const size_t sent = args_sent_ - args_begin_;
    if (args.size() >= sent) d.arguments = args.substr(sent);
  } else {
    d.arguments = args;
  }
  if (d.start || !d.arguments.empty()) out.calls.push_back(std::move(d));
  calls_.push_back({id_, name_, args});
}

std::string ToolCallParser::new_id() const {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = id_prefix_;
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

}  // namespace vela
