// GBNF parser: recursive descent over the text, straight into the Grammar IR.
#include "engine/constrain/ebnf.h"

#include <vector>

#include "core/error.h"
#include "engine/constrain/char_escape.h"
#include "tokenizer/unicode.h"

namespace vela::constrain {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  Grammar run(const std::string& root) {
    skip_space();
    while (pos_ < t_.size()) {
      const size_t at = pos_;
      std::string name = parse_name();
      if (name.empty()) fail(at, "expected a rule name");
      skip_space();
      if (t_.compare(pos_, 3, "::=") != 0)
        fail(pos_, "expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      int32_t id = g_.rule_id(name);
      if (defined_.size() <= static_cast<size_t>(id))
        defined_.resize(static_cast<size_t>(id) + 1, 0);
      if (defined_[static_cast<size_t>(id)]) fail(at, "rule '" + name + "' is defined twice");
      defined_[static_cast<size_t>(id)] = 1;
      g_.bodies[static_cast<size_t>(id)] = parse_alternatives(0);
      skip_space();
    }
    for (int32_t r = 0; r < g_.n_rules(); ++r) {
      if (static_cast<size_t>(r) >= defined_.size() || !defined_[static_cast<size_t>(r)])
        VELA_THROW(InvalidArgument, "grammar: rule '", g_.names[static_cast<size_t>(r)],
                   "' is used but never defined");
    }
    g_.root = g_.find(root);
    VELA_CHECK(g_.root >= 0, "grammar: no '", root, "' rule (the start symbol)");
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    VELA_THROW(InvalidArgument, "grammar: line ", line, " column ", col, ": ", what);
  }
  void skip_space() {
    while (pos_ < t_.size()) {
      char c = t_[pos_];
      if (c == '#') {
        while (pos_ < t_.size() && t_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  std::string parse_name() {
    size_t b = pos_;
    while (pos_ < t_.size() && is_name_char(t_[pos_])) ++pos_;
    return std::string(t_.substr(b, pos_ - b));
  }
  // At a name followed by ::= (the start of the next rule)?
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < t_.size() && is_name_char(t_[p])) ++p;
    if (p == pos_) return false;
    while (p < t_.size() && (t_[p] == ' ' || t_[p] == '\t' || t_[p] == '\n' || t_[p] == '\r')) ++p;
    return t_.compare(p, 3, "::=") == 0;
  }
  Expr parse_alternatives(int depth) {
    if (depth > kMaxNestingDepth) fail(pos_, "groups nest too deeply");
    std::vector<Expr> alts;
    alts.push_back(parse_sequence(depth));
    skip_space();
    while (pos_ < t_.size() && t_[pos_] == '|') {
      ++pos_;
      alts.push_back(parse_sequence(depth));
      skip_space();
    }
    return Expr::alt(std::move(alts));
  }
  Expr parse_sequence(int depth) {
    std::vector<Expr> items;
    for (;;) {
      skip_space();
      if (pos_ >= t_.size()) break;
      char c = t_[pos_];
      if (c == '|' || c == ')') break;
      if (depth == 0 && at_rule_start()) break;
      Expr item = parse_primary(depth);
      items.push_back(parse_postfix(std::move(item)));
    }
    return Expr::seq(std::move(items));
  }
  Expr parse_primary(int depth) {
    const size_t at = pos_;
    char c = t_[pos_];
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (pos_ < t_.size() && t_[pos_] != '"') {
        uint32_t cp = read_char();
        unicode::append_utf8(bytes, cp);
      }
      if (pos_ >= t_.size()) fail(at, "unterminated string literal");
      ++pos_;
      return Expr::literal(bytes);
    }
    if (c == '[') {
      ++pos_;
      bool negated = false;
      if (pos_ < t_.size() && t_[pos_] == '^') {
        negated = true;
        ++pos_;
      }
      std::vector<CodepointRange> ranges;
      while (pos_ < t_.size() && t_[pos_] != ']') {
        uint32_t lo = read_char(), hi = lo;
        if (pos_ + 1 < t_.size() && t_[pos_] == '-' && t_[pos_ + 1] != ']') {
          ++pos_;
          hi = read_char();
          if (hi < lo) fail(at, "character range is reversed");
        }
        ranges.push_back({lo, hi});
      }
      if (pos_ >= t_.size()) fail(at, "unterminated character class");
      ++pos_;
      return utf8_class(std::move(ranges), negated);
    }
    if (c == '.') {
      ++pos_;
      return utf8_class({}, true);
    }
    if (c == '(') {
      ++pos_;
      Expr e = parse_alternatives(depth + 1);
      skip_space();
      if (pos_ >= t_.size() || t_[pos_] != ')') fail(at, "unclosed '('");
      ++pos_;
      return e;
    }
    if (is_name_char(c)) {
      std::string name = parse_name();
      return Expr::ref(g_.rule_id(name));
    }
    fail(at, std::string("unexpected character '") + c + "'");
  }
  Expr parse_postfix(Expr e) {
    for (;;) {
      if (pos_ >= t_.size()) return e;
      char c = t_[pos_];
      if (c == '*') {
        ++pos_;
        e = Expr::star(std::move(e));
      } else if (c == '+') {
        ++pos_;
        e = Expr::repeat(std::move(e), 1, -1);
      } else if (c == '?') {
        ++pos_;
        e = Expr::optional(std::move(e));
      } else if (c == '{') {
        const size_t at = pos_++;
        auto number = [&]() -> int64_t {
          size_t b = pos_;
          int64_t v = 0;
          while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') {
            v = v * 10 + (t_[pos_++] - '0');
            if (v > kMaxRepeat) fail(at, "repetition bound above " + std::to_string(kMaxRepeat));
          }
          return pos_ == b ? -1 : v;
        };
        skip_space();
        int64_t lo = number(), hi = lo;
        skip_space();
        if (lo < 0) fail(at, "expected a number in {m,n}");
        if (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          skip_space();
          hi = number();
          skip_space();
        }
        if (pos_ >= t_.size() || t_[pos_] != '}') fail(at, "expected '}'");
        ++pos_;
        if (hi >= 0 && hi < lo) fail(at, "repetition {m,n} has n < m");
        e = Expr::repeat(std::move(e), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
      } else {
        return e;
      }
    }
  }
  // One (possibly escaped) character of a literal or class, as a code point.
  uint32_t read_char() {
    const size_t at = pos_;
    if (t_[pos_] == '\\') {
      ++pos_;
      if (pos_ >= t_.size()) fail(at, "dangling backslash");
      std::string err;
      uint32_t cp = read_escape(t_, pos_, &err);
      if (!err.empty()) fail(at, err);
      return cp;
    }
    std::string err;
    uint32_t cp = read_utf8(t_, pos_, &err);
    if (!err.empty()) fail(at, err);
    return cp;
  }

  std::string_view t_;
  size_t pos_ = 0;
  Grammar g_;
  std::vector<uint8_t> defined_;
};

}  // namespace

Grammar parse_ebnf(std::string_view text, const std::string& root) {
  return Parser(text).run(root);
}

}  // namespace vela::constrain
