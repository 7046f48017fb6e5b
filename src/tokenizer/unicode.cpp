// UTF-8 and Unicode helpers (see unicode.h). Categories come from utf8proc; the byte-level table is
// GPT-2's bytes_to_unicode().
#include "tokenizer/unicode.h"

#include <utf8proc.h>

namespace vela::unicode {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// Length of the valid UTF-8 sequence at s[i], 0 if invalid; *incomplete set when the sequence is
// a valid prefix cut short by the end of s.
size_t valid_seq(std::string_view s, size_t i, bool* incomplete) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size() - i;
  unsigned char b = p[i];
  *incomplete = false;
  if (b < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (k >= n) {
      *incomplete = true;
      return 0;
    }
    unsigned char c = p[i + k];
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) return 0;
  }
  return len;
}

}  // namespace

size_t find_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    bool inc;
    size_t n = valid_seq(s, i, &inc);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view s) {
  if (find_invalid_utf8(s) == std::string_view::npos) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    bool inc;
    size_t n = valid_seq(s, i, &inc);
    if (n > 0) {
      out.append(s.data() + i, n);
      i += n;
      continue;
    }
    // Rust's from_utf8_lossy: one U+FFFD per maximal invalid prefix (the bytes that were still a
    // valid prefix of some sequence are consumed together).
    size_t k = 1;
    unsigned char b = p[i];
    size_t len = (b >= 0xC2 && b <= 0xDF)   ? 2
                 : (b >= 0xE0 && b <= 0xEF) ? 3
                 : (b >= 0xF0 && b <= 0xF4) ? 4
                                            : 1;
    while (k < len && i + k < s.size()) {
      unsigned char c = p[i + k];
      unsigned char lo = 0x80, hi = 0xBF;
      if (k == 1) {
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
      }
      if (c < lo || c > hi) break;
      ++k;
    }
    out += "\xEF\xBF\xBD";
    i += k;
  }
  return out;
}

size_t complete_prefix_len(std::string_view s) {
  // Look back at most 3 bytes for an unfinished lead byte.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    unsigned char b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    if (b < 0x80) return n;
    bool inc;
    size_t len = valid_seq(s, i, &inc);
    if (len == 0 && inc) return i;  // a valid prefix that more bytes may complete
    return n;
  }
  return n;
}

bool is_whitespace(uint32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

namespace {
inline utf8proc_category_t cat(uint32_t c) {
  return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}
bool is_letter_cat(utf8proc_category_t k) {
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}
bool is_mark_cat(utf8proc_category_t k) {
  return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}
// Other_Alphabetic code points that are not marks (circled/squared/negative letters).
bool is_other_alpha_symbol(uint32_t c) {
  return (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
         (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}
// Alphabetic ~ L + Nl + Other_Alphabetic; marks are treated as alphabetic only by callers that
// also accept M (Other_Alphabetic marks), so this approximation is exact for \w.
bool is_alphabetic_nomark(uint32_t c) {
  auto k = cat(c);
  return is_letter_cat(k) || k == UTF8PROC_CATEGORY_NL || is_other_alpha_symbol(c);
}
}  // namespace

bool is_numeric(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto k = cat(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool is_word_char(uint32_t c) {
  if (c < 0x80)
    return c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  auto k = cat(c);
  return is_alphabetic_nomark(c) || is_mark_cat(k) || k == UTF8PROC_CATEGORY_ND ||
         k == UTF8PROC_CATEGORY_PC || c == 0x200C || c == 0x200D;
}

void append_lowercase(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  if (c == 0x130) {  // the one unconditional multi-char lowercase mapping
    out += "i\xCC\x87";
    return;
  }
  append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

namespace {
struct ByteTables {
  std::array<uint32_t, 256> b2c{};
  std::array<std::string, 256> b2s;
  std::array<int16_t, 512> c2b{};
  ByteTables() {
    c2b.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      b2c[b] = printable ? b : 256 + n++;
    }
    for (int b = 0; b < 256; ++b) {
      c2b[b2c[b]] = static_cast<int16_t>(b);
      b2s[b] = to_utf8(b2c[b]);
    }
  }
};
const ByteTables& tables() {
  static const ByteTables t;
  return t;
}
}  // namespace

const std::array<uint32_t, 256>& byte_to_cp() { return tables().b2c; }
const std::array<std::string, 256>& byte_to_utf8() { return tables().b2s; }
int cp_to_byte(uint32_t cp) { return cp < 512 ? tables().c2b[cp] : -1; }

}  // namespace vela::unicode
