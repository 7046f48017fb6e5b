// Regex parser: recursive descent into the Grammar IR (code point classes expanded to UTF-8).
#include "engine/constrain/regex.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/constrain/char_escape.h"
#include "tokenizer/unicode.h"

namespace vela::constrain {
namespace {

using Ranges = std::vector<CodepointRange>;

Ranges complement(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (hi < next) continue;
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

const Ranges& digit_ranges() {
  static const Ranges r{{'0', '9'}};
  return r;
}
const Ranges& word_ranges() {
  static const Ranges r{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return r;
}
const Ranges& space_ranges() {
  static const Ranges r{{'\t', '\r'}, {' ', ' '}};
  return r;
}

class RegexParser {
 public:
  RegexParser(std::string_view p, const RegexOptions& o) : p_(p), opt_(o) {}

  Expr run() {
    size_t end = p_.size();
    if (!p_.empty() && p_[0] == '^') pos_ = 1;
    // A trailing unescaped $ anchors the end.
    if (end > pos_ && p_[end - 1] == '$') {
      size_t bs = 0;
      for (size_t k = end - 1; k > 0 && p_[k - 1] == '\\'; --k) ++bs;
      if (bs % 2 == 0) --end;
    }
    p_ = p_.substr(0, end);
    Expr e = parse_alt(0);
    if (pos_ < p_.size()) fail("unbalanced ')'");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    VELA_THROW(InvalidArgument, "regex: ", what, " at position ", pos_, " of /", p_, "/");
  }
  Expr parse_alt(int depth) {
    if (depth > kMaxNestingDepth) fail("groups nest too deeply");
    std::vector<Expr> alts;
    alts.push_back(parse_seq(depth));
    while (pos_ < p_.size() && p_[pos_] == '|') {
      ++pos_;
      alts.push_back(parse_seq(depth));
    }
    return Expr::alt(std::move(alts));
  }
  Expr parse_seq(int depth) {
    std::vector<Expr> items;
    while (pos_ < p_.size() && p_[pos_] != '|' && p_[pos_] != ')') {
      Expr atom = parse_atom(depth);
      items.push_back(parse_quantifier(std::move(atom)));
    }
    return Expr::seq(std::move(items));
  }
  Expr parse_quantifier(Expr e) {
    for (;;) {
      if (pos_ >= p_.size()) return e;
      char c = p_[pos_];
      int32_t lo, hi;
      if (c == '*') {
        lo = 0, hi = -1, ++pos_;
      } else if (c == '+') {
        lo = 1, hi = -1, ++pos_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++pos_;
      } else if (c == '{' && pos_ + 1 < p_.size() && p_[pos_ + 1] >= '0' && p_[pos_ + 1] <= '9') {
        ++pos_;
        auto num = [&]() -> int64_t {
          int64_t v = -1;
          while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
            v = (v < 0 ? 0 : v) * 10 + (p_[pos_++] - '0');
            if (v > kMaxRepeat) fail("repetition bound above " + std::to_string(kMaxRepeat));
          }
          return v;
        };
        int64_t a = num(), b = a;
        if (pos_ < p_.size() && p_[pos_] == ',') {
          ++pos_;
          b = num();
        }
        if (pos_ >= p_.size() || p_[pos_] != '}') fail("expected '}' in {m,n}");
        ++pos_;
        if (b >= 0 && b < a) fail("repetition {m,n} has n < m");
        lo = static_cast<int32_t>(a), hi = static_cast<int32_t>(b);
      } else {
        return e;
      }
      if (pos_ < p_.size() && p_[pos_] == '?') ++pos_;  // lazy: same language
      if (pos_ < p_.size() && p_[pos_] == '+') fail("possessive quantifiers are not supported");
      e = Expr::repeat(std::move(e), lo, hi);
    }
  }
  Expr parse_atom(int depth) {
    char c = p_[pos_];
    if (c == '(') {
      ++pos_;
      if (pos_ < p_.size() && p_[pos_] == '?') {
        ++pos_;
        if (pos_ < p_.size() && p_[pos_] == ':') {
          ++pos_;
        } else if (pos_ < p_.size() && (p_[pos_] == 'P' || p_[pos_] == '<') &&
                   !(p_[pos_] == '<' && pos_ + 1 < p_.size() &&
                     (p_[pos_ + 1] == '=' || p_[pos_ + 1] == '!'))) {
          if (p_[pos_] == 'P') ++pos_;
          if (pos_ >= p_.size() || p_[pos_] != '<') fail("expected '<' in a named group");
          while (pos_ < p_.size() && p_[pos_] != '>') ++pos_;
          if (pos_ >= p_.size()) fail("unterminated group name");
          ++pos_;
        } else {
          fail("lookaround and inline flags (?...) are not supported");
        }
      }
      Expr e = parse_alt(depth + 1);
      if (pos_ >= p_.size() || p_[pos_] != ')') fail("unclosed '('");
      ++pos_;
      return e;
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return make_class(Ranges{{'\n', '\n'}}, true);
    }
    if (c == '^' || c == '$') fail(std::string("anchor '") + c + "' inside the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (c == '{') {  // a literal '{' not followed by a quantifier (as Python)
        ++pos_;
        return literal('{');
      }
      fail(std::string("nothing to repeat before '") + c + "'");
    }
    if (c == '\\') {
      ++pos_;
      if (pos_ >= p_.size()) fail("dangling backslash");
      Ranges r;
      bool neg = false;
      if (class_escape(r, neg)) return make_class(std::move(r), neg);
      char e = p_[pos_];
      if (e == 'b' || e == 'B') fail("word boundaries (\\b) are not supported");
      if (e >= '1' && e <= '9') fail("backreferences are not supported");
      std::string err;
      uint32_t cp = read_escape(p_, pos_, &err);
      if (!err.empty()) fail(err);
      return literal(cp);
    }
    std::string err;
    uint32_t cp = read_utf8(p_, pos_, &err);
    if (!err.empty()) fail(err);
    return literal(cp);
  }
  // \d \D \w \W \s \S at pos_ (past the backslash): fills the ranges and advances.
  bool class_escape(Ranges& r, bool& neg) {
    switch (p_[pos_]) {
      case 'd':
        r = digit_ranges();
        break;
      case 'D':
        r = digit_ranges(), neg = true;
        break;
      case 'w':
        r = word_ranges();
        break;
      case 'W':
        r = word_ranges(), neg = true;
        break;
      case 's':
        r = space_ranges();
        break;
      case 'S':
        r = space_ranges(), neg = true;
        break;
      default:
        return false;
    }
    ++pos_;
    return true;
  }
  Expr parse_class() {
    ++pos_;  // '['
    bool negated = false;
    if (pos_ < p_.size() && p_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    Ranges ranges;
    bool first = true;
    while (pos_ < p_.size() && (p_[pos_] != ']' || first)) {
      first = false;
      if (p_.compare(pos_, 2, "[:") == 0) fail("POSIX classes [:name:] are not supported");
      uint32_t lo;
      if (p_[pos_] == '\\') {
        ++pos_;
        if (pos_ >= p_.size()) fail("dangling backslash");
        Ranges sub;
        bool neg = false;
        if (class_escape(sub, neg)) {
          if (neg) sub = complement(sub);
          ranges.insert(ranges.end(), sub.begin(), sub.end());
          continue;
        }
        std::string err;
        lo = p_[pos_] == 'b' ? (++pos_, '\b') : read_escape(p_, pos_, &err);
        if (!err.empty()) fail(err);
      } else {
        std::string err;
        lo = read_utf8(p_, pos_, &err);
        if (!err.empty()) fail(err);
      }
      uint32_t hi = lo;
      if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        std::string err;
        if (p_[pos_] == '\\') {
          ++pos_;
          hi = read_escape(p_, pos_, &err);
        } else {
          hi = read_utf8(p_, pos_, &err);
        }
        if (!err.empty()) fail(err);
        if (hi < lo) fail("character range is reversed");
      }
      ranges.push_back({lo, hi});
    }
    if (pos_ >= p_.size()) fail("unterminated character class");
    ++pos_;
    return make_class(std::move(ranges), negated);
  }
  Expr make_class(Ranges r, bool negated) {
    if (negated) r = complement(std::move(r));
    if (opt_.json_string) {
      // Drop what JSON would have to escape.
      Ranges keep;
      for (auto [lo, hi] : r) {
        auto cut = [&](uint32_t a, uint32_t b) {
          if (a <= b) keep.push_back({a, b});
        };
        // Excluded: 0x00-0x1F, '"' (0x22), '\\' (0x5C).
        uint32_t a = std::max<uint32_t>(lo, 0x20);
        if (a > hi) continue;
        if (a <= 0x22 && hi >= 0x22) {
          cut(a, 0x21);
          a = 0x23;
        }
        if (a <= 0x5C && hi >= 0x5C) {
          cut(a, 0x5B);
          a = 0x5D;
        }
        cut(a, hi);
      }
      r = std::move(keep);
    }
    return utf8_class(std::move(r), false);
  }
  Expr literal(uint32_t cp) {
    std::string bytes;
    if (opt_.json_string && (cp < 0x20 || cp == '"' || cp == '\\')) {
      static const char* kHex = "0123456789abcdef";
      switch (cp) {
        case '"':
          bytes = "\\\"";
          break;
        case '\\':
          bytes = "\\\\";
          break;
        case '\n':
          bytes = "\\n";
          break;
        case '\t':
          bytes = "\\t";
          break;
        case '\r':
          bytes = "\\r";
          break;
        default:
          bytes = std::string("\\u00") + kHex[cp >> 4] + kHex[cp & 15];
      }
      return Expr::literal(bytes);
    }
    unicode::append_utf8(bytes, cp);
    return Expr::literal(bytes);
  }

  std::string_view p_;
  const RegexOptions& opt_;
  size_t pos_ = 0;
};

}  // namespace

Expr regex_to_expr(std::string_view pattern, const RegexOptions& opt) {
  return RegexParser(pattern, opt).run();
}

Grammar regex_grammar(std::string_view pattern) {
  Grammar g;
  g.root = g.add_rule("root", regex_to_expr(pattern));
  return g;
}

}  // namespace vela::constrain
