// UTF-8 and Unicode helpers for the tokenizer: decoding/encoding code points, the character
// classes Hugging Face tokenizers uses outside regexes (Rust's char::is_whitespace,
// is_numeric, regex \w), lowercase as Rust's char::to_lowercase, and the GPT-2 byte<->char
// table of the ByteLevel pre-tokenizer/decoder. All functions are pure and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace vela::unicode {

// Decodes the code point at s[i] (valid UTF-8 assumed) and advances i past it.
inline uint32_t next_cp(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  uint32_t c = p[i];
  if (c < 0x80) {
    i += 1;
    return c;
  }
  if (c < 0xE0) {
    c = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F);
    i += 2;
  } else if (c < 0xF0) {
    c = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
    i += 3;
  } else {
    c = ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) |
        (p[i + 3] & 0x3F);
    i += 4;
  }
  return c;
}

// Byte length of the UTF-8 sequence that starts with byte b (1 for stray continuation bytes).
inline int seq_len(unsigned char b) {
  return b < 0x80 ? 1 : b < 0xE0 ? (b < 0xC0 ? 1 : 2) : b < 0xF0 ? 3 : 4;
}

void append_utf8(std::string& out, uint32_t cp);
inline std::string to_utf8(uint32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

// Returns the byte offset of the first invalid UTF-8 sequence, or npos if s is valid.
size_t find_invalid_utf8(std::string_view s);
// Replaces every invalid sequence by U+FFFD (as Rust's String::from_utf8_lossy does).
std::string utf8_lossy(std::string_view s);
// Length of the longest prefix of s that ends on a complete code point (an incomplete trailing
// sequence that could still become valid is excluded).
size_t complete_prefix_len(std::string_view s);

bool is_whitespace(uint32_t cp);  // Unicode White_Space (Rust char::is_whitespace)
bool is_numeric(uint32_t cp);     // Rust char::is_numeric: Nd, Nl, No
bool is_word_char(uint32_t cp);   // Rust regex \w: Alphabetic, M, Nd, Pc, Join_Control
// Appends Rust's char::to_lowercase(cp) (full mapping: U+0130 becomes "i\u0307").
void append_lowercase(std::string& out, uint32_t cp);

// GPT-2's byte-level alphabet: every byte is shown as a printable code point.
const std::array<uint32_t, 256>& byte_to_cp();
// The inverse: code point -> byte, or -1 when cp is not in the alphabet.
int cp_to_byte(uint32_t cp);
// UTF-8 of the byte-level char for each byte (precomputed).
const std::array<std::string, 256>& byte_to_utf8();

}  // namespace vela::unicode
