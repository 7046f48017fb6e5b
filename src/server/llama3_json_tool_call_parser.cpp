// Llama3JsonToolCallParser. kStart decides from the first non-whitespace bytes (holding back a
// partial <|python_tag|>): '{' opens a call, anything else makes the whole reply content (kText).
// kCall tracks the call object's nesting (strings skipped) to find where it ends, announces the
// call once `"name": "...", "parameters": ` is read and streams an object of arguments exactly up
// to its closing brace. kBetween expects ';' (or a newline) and the next call, or the end.
#include "server/llama3_json_tool_call_parser.h"

#include "core/json.h"
#include "server/json_scan.h"

namespace vela {

using namespace json_scan;

namespace {
constexpr std::string_view kTag = "<|python_tag|>";
constexpr size_t npos = std::string::npos;
}  // namespace

void Llama3JsonToolCallParser::ValueScanner::feed(std::string_view buf) {
  for (; pos < buf.size() && end == npos; ++pos) {
    const char c = buf[pos];
    if (in_string) {
      if (escape)
        escape = false;
      else if (c == '\\')
        escape = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth <= 0) {
      end = pos + 1;
    }
  }
}

Llama3JsonToolCallParser::Llama3JsonToolCallParser(std::string id_prefix)
    : ToolCallParser(std::move(id_prefix)) {}

ToolCallParser::Delta Llama3JsonToolCallParser::finish() {
  Delta out;
  run(out, true);
  return out;
}

void Llama3JsonToolCallParser::begin_call() {
  object_ = ValueScanner();
  args_ = ValueScanner();
  start_call();
}

void Llama3JsonToolCallParser::run(Delta& out, bool final) {
  while (true) {
    switch (state_) {
      case State::kText:
        out.content += buf_;
        buf_.clear();
        return;
      case State::kStart:
      case State::kBetween: {
        const size_t i = skip_space(buf_, 0);
        if (i == buf_.size()) {
          if (final) {
            // A blank reply is content; whitespace or a ';' after the last call is not.
            if (state_ == State::kStart) out.content += lead_ + buf_;
            lead_.clear();
            buf_.clear();
          }
          return;
        }
        const int tag = match(buf_, i, kTag);
        if (tag == 0 && !final) return;  // maybe <|python_tag|>
        const char c = buf_[i];
        if (tag == 1 || (state_ == State::kBetween && c == ';')) {
          const size_t n = i + (tag == 1 ? kTag.size() : 1);
          lead_ += buf_.substr(0, n);
          buf_.erase(0, n);
          continue;
        }
        if (c == '{') {
          lead_ += buf_.substr(0, i);
          buf_.erase(0, i);
          begin_call();
          state_ = State::kCall;
          continue;
        }
        out.content += lead_ + buf_;  // not a call: the rest of the reply is content
        lead_.clear();
        buf_.clear();
        state_ = State::kText;
        return;
      }
      case State::kCall: {
        object_.feed(buf_);
        if (!args_located_) scan_header(out);
        if (stream_args_) {
          args_.feed(buf_);
          stream_arguments(out);
        }
        if (object_.end == npos && !final) return;
        const size_t end = object_.end == npos ? buf_.size() : object_.end;
        const std::string body = buf_.substr(0, end);
        buf_.erase(0, end);
        state_ = close_call(out, body) ? State::kBetween : State::kText;
        lead_.clear();
        if (final && state_ == State::kText && buf_.empty()) return;
        continue;
      }
    }
  }
}

void Llama3JsonToolCallParser::scan_header(Delta& out) {
  // `{"name": "NAME", "parameters": ` (or "arguments"); any other shape is sent when it closes.
  std::string_view s = buf_;
  auto give_up = [this] { args_located_ = true; };
  size_t i = skip_space(s, 1);
  int m = match(s, i, "\"name\"");
  if (m <= 0) {
    if (m < 0) give_up();
    return;
  }
  i = skip_space(s, i + 6);
  if (i >= s.size()) return;
  if (s[i] != ':') return give_up();
  i = skip_space(s, i + 1);
  if (i >= s.size()) return;
  if (s[i] != '"') return give_up();
  const size_t e = string_end(s, i);
  if (e == npos) return;
  json name = json::parse(s.substr(i, e - i), nullptr, /*allow_exceptions=*/false);
  if (!name.is_string() || name.get<std::string>().empty()) return give_up();
  size_t j = skip_space(s, e);
  if (j >= s.size()) return;
  if (s[j] != ',') return give_up();
  j = skip_space(s, j + 1);
  if (j >= s.size()) return;
  const int mp = match(s, j, "\"parameters\""), ma = match(s, j, "\"arguments\"");
  if (mp < 0 && ma < 0) return give_up();
  if (mp != 1 && ma != 1) return;
  j = skip_space(s, j + (mp == 1 ? 12 : 11));
  if (j >= s.size()) return;
  if (s[j] != ':') return give_up();
  j = skip_space(s, j + 1);
  if (j >= s.size()) return;
  args_located_ = true;
  announce(out, name.get<std::string>());
  if (s[j] != '{') return;
  stream_args_ = true;
  args_begin_ = args_sent_ = j;
  args_ = ValueScanner();
  args_.pos = j;
}

void Llama3JsonToolCallParser::stream_arguments(Delta& out) {
  // Everything scanned inside the arguments object is arguments text, up to its closing brace.
  send_arguments(out, args_.end != npos ? args_.end : args_.pos);
}

bool Llama3JsonToolCallParser::close_call(Delta& out, std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const char* key = j.is_object() && j.contains("parameters") ? "parameters" : "arguments";
  const bool ok = j.is_object() && j.contains("name") && j["name"].is_string() &&
                  !j["name"].get<std::string>().empty() && j.contains(key);
  if (!ok && !header_sent_) {
    // Not a tool call after all: give the text back as content.
    out.content += lead_ + std::string(body);
    return false;
  }
  std::string args;
  if (ok) {
    const json& a = j[key];
    if (a.is_string()) {
      args = a.get<std::string>();
    } else if (stream_args_ && args_.end != npos) {
      std::string raw(body.substr(args_begin_, args_.end - args_begin_));
      json reparsed = json::parse(raw, nullptr, false);
      args = !reparsed.is_discarded() && reparsed == a ? raw : a.dump();
    } else {
      args = a.is_null() ? "{}" : a.dump();
    }
  } else if (stream_args_) {
    // Announced but broken (e.g. cut off by max_tokens): keep what the model wrote.
    const size_t e = args_.end != npos ? args_.end : body.size();
    args = std::string(body.substr(args_begin_, e - args_begin_));
  }
  complete_call(out, header_sent_ ? name_ : j["name"].get<std::string>(), args);
  begin_call();
  return true;
}

}  // namespace vela
