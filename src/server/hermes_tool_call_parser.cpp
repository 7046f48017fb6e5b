// HermesToolCallParser. kText scans for "<tool_call>" (holding back a partial tag); kCall
// accumulates the body until "</tool_call>", announcing the name once `{"name": "..."` is complete
// and then releasing the arguments text except a tail that could be the outer object's closing
// brace.
#include "server/hermes_tool_call_parser.h"

#include "core/json.h"
#include "server/json_scan.h"
#include "server/reasoning_parser.h"

namespace vela {

using namespace json_scan;

namespace {
constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
}  // namespace

HermesToolCallParser::HermesToolCallParser(std::string id_prefix)
    : ToolCallParser(std::move(id_prefix)) {}

ToolCallParser::Delta HermesToolCallParser::finish() {
  Delta out;
  run(out, true);
  if (state_ == State::kCall) {
    std::string body = buf_;
    close_call(out, body, /*terminated=*/false);
    buf_.clear();
    state_ = State::kText;
  }
  return out;
}

void HermesToolCallParser::run(Delta& out, bool final) {
  while (true) {
    if (state_ == State::kText) {
      size_t pos = buf_.find(kOpen);
      if (pos == std::string::npos) {
        size_t hold = final ? 0 : partial_tag_suffix(buf_, kOpen);
        out.content += buf_.substr(0, buf_.size() - hold);
        buf_.erase(0, buf_.size() - hold);
        return;
      }
      out.content += buf_.substr(0, pos);
      buf_.erase(0, pos + kOpen.size());
      state_ = State::kCall;
      start_call();
      name_end_ = 0;
      continue;
    }
    size_t end = buf_.find(kClose);
    if (end != std::string::npos) {
      std::string body = buf_.substr(0, end);
      if (!args_located_) scan_header(out);
      if (stream_args_) stream_arguments(out);
      buf_.erase(0, end + kClose.size());
      close_call(out, body, /*terminated=*/true);
      state_ = State::kText;
      continue;
    }
    if (!args_located_) scan_header(out);
    if (stream_args_) stream_arguments(out);
    return;
  }
}

void HermesToolCallParser::scan_header(Delta& out) {
  std::string_view s = buf_;
  if (!header_sent_) {
    size_t i = skip_space(s, 0);
    if (i >= s.size() || s[i] != '{') return;
    i = skip_space(s, i + 1);
    if (match(s, i, "\"name\"") != 1) return;
    i = skip_space(s, i + 6);
    if (i >= s.size() || s[i] != ':') return;
    i = skip_space(s, i + 1);
    if (i >= s.size() || s[i] != '"') return;
    size_t e = string_end(s, i);
    if (e == std::string_view::npos) return;
    json name = json::parse(s.substr(i, e - i), nullptr, /*allow_exceptions=*/false);
    if (!name.is_string() || name.get<std::string>().empty()) return;
    name_end_ = e;
    announce(out, name.get<std::string>());
  }
  if (args_located_) return;
  // `, "arguments": {` after the name: stream the object; anything else is sent when it closes.
  size_t j = skip_space(s, name_end_);
  if (j >= s.size()) return;
  if (s[j] != ',') {
    args_located_ = true;
    return;
  }
  j = skip_space(s, j + 1);
  int m = match(s, j, "\"arguments\"");
  if (m == 0) return;
  if (m < 0) {
    args_located_ = true;
    return;
  }
  j = skip_space(s, j + 11);
  if (j >= s.size()) return;
  if (s[j] != ':') {
    args_located_ = true;
    return;
  }
  j = skip_space(s, j + 1);
  if (j >= s.size()) return;
  args_located_ = true;
  if (s[j] != '{') return;
  stream_args_ = true;
  args_begin_ = args_sent_ = j;
}

void HermesToolCallParser::stream_arguments(Delta& out) {
  // Hold back a partial "</tool_call>", trailing whitespace, and one '}' (it may close the outer
  // object rather than the arguments) with the whitespace before it.
  std::string_view s = buf_;
  size_t close = s.find(kClose);
  size_t end = close == std::string_view::npos ? s.size() - partial_tag_suffix(s, kClose) : close;
  while (end > args_begin_ && is_space(s[end - 1])) --end;
  if (end > args_begin_ && s[end - 1] == '}') --end;
  while (end > args_begin_ && is_space(s[end - 1])) --end;
  send_arguments(out, end);
}

void HermesToolCallParser::close_call(Delta& out, std::string_view body, bool terminated) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  bool ok = j.is_object() && j.contains("name") && j["name"].is_string() &&
            !j["name"].get<std::string>().empty();
  const char* args_key = j.is_object() && !j.contains("arguments") && j.contains("parameters")
                             ? "parameters"
                             : "arguments";
  std::string args;
  if (ok) {
    const json& a = j.is_object() && j.contains(args_key) ? j[args_key] : json::object();
    if (a.is_string()) {
      args = a.get<std::string>();
    } else if (stream_args_) {
      // The raw arguments text: from its start to the outer object's closing brace.
      size_t e = body.find_last_of('}');
      std::string raw = e == std::string_view::npos || e < args_begin_
                            ? std::string()
                            : trim(body.substr(args_begin_, e - args_begin_));
      json reparsed = json::parse(raw, nullptr, false);
      args = !reparsed.is_discarded() && reparsed == a ? raw : a.dump();
    } else {
      args = a.is_null() ? "{}" : a.dump();
    }
  }
  if (!ok && !header_sent_) {
    // Not a tool call after all: give the text back as content.
    out.content += std::string(kOpen) + std::string(body) + (terminated ? std::string(kClose) : "");
    return;
  }
  if (!ok) {
    // Announced but broken (e.g. cut off by max_tokens): keep what the model wrote.
    std::string_view s = body;
    if (stream_args_) {
      args = std::string(s.substr(args_begin_));
    } else {
      args.clear();
    }
  }
  complete_call(out, header_sent_ ? name_ : j["name"].get<std::string>(), args);
  start_call();
}

}  // namespace vela
