// Character reading shared by the EBNF and regex parsers: one UTF-8 character, and the common
// backslash escapes. Both report problems through *err (empty when fine) instead of throwing, so
// each parser can say where the problem is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace vela::constrain {

// The UTF-8 character at t[pos]; advances pos.
inline uint32_t read_utf8(std::string_view t, size_t& pos, std::string* err) {
  const auto c = static_cast<unsigned char>(t[pos]);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || pos + static_cast<size_t>(n) > t.size()) {
    *err = "invalid UTF-8";
    ++pos;
    return 0;
  }
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(t[pos + static_cast<size_t>(k)]);
    if ((d & 0xC0) != 0x80) {
      *err = "invalid UTF-8";
      pos += static_cast<size_t>(k);
      return 0;
    }
    cp = (cp << 6) | (d & 0x3F);
  }
  pos += static_cast<size_t>(n);
  return cp;
}

// The escape after a backslash at t[pos] (pos is past the backslash): \n \r \t \f \v \0 \xHH
// \uHHHH \u{H...} \UHHHHHHHH, or the next character itself (\\ \" \[ \. ...). Advances pos.
inline uint32_t read_escape(std::string_view t, size_t& pos, std::string* err) {
  const char c = t[pos++];
  auto hex = [&](size_t n_digits) -> uint32_t {
    uint32_t v = 0;
    for (size_t k = 0; k < n_digits; ++k) {
      if (pos >= t.size()) {
        *err = "truncated hex escape";
        return 0;
      }
      char h = t[pos++];
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) {
        *err = std::string("bad hex digit '") + h + "' in escape";
        return 0;
      }
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  };
  switch (c) {
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'f':
      return '\f';
    case 'v':
      return '\v';
    case '0':
      return 0;
    case 'x':
      return hex(2);
    case 'U':
      return hex(8);
    case 'u': {
      if (pos < t.size() && t[pos] == '{') {
        ++pos;
        uint32_t v = 0;
        while (pos < t.size() && t[pos] != '}') {
          size_t save = pos;
          v = v * 16 + hex(1);
          if (!err->empty() || pos == save || v > 0x10FFFF) {
            *err = "bad \\u{...} escape";
            return 0;
          }
        }
        ++pos;
        return v;
      }
      return hex(4);
    }
    default: {
      --pos;
      return read_utf8(t, pos, err);
    }
  }
}

}  // namespace vela::constrain
