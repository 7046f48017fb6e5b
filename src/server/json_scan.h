// Small scanning helpers over partial JSON text, shared by the streaming tool-call parsers: they
// look at a prefix of what the model wrote and say "matched", "not yet" or "no".
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace vela::json_scan {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

inline size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// A complete JSON string literal starting at s[i] == '"': the offset one past its closing quote,
// or npos when s ends inside it.
inline size_t string_end(std::string_view s, size_t i) {
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] == '\\') {
      ++j;
      continue;
    }
    if (s[j] == '"') return j + 1;
  }
  return std::string_view::npos;
}

// A literal at s[i]: 1 = matched, 0 = incomplete (s ends inside it), -1 = mismatch.
inline int match(std::string_view s, size_t i, std::string_view lit) {
  std::string_view have = s.substr(std::min(i, s.size()), lit.size());
  if (lit.substr(0, have.size()) != have) return -1;
  return have.size() == lit.size() ? 1 : 0;
}

inline std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace vela::json_scan
