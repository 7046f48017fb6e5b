// Jinja lexer (see jinja_lexer.h). Mirrors jinja2/lexer.py: the root state finds the next
// `{%` / `{{` / `{#`, applies `-` stripping or lstrip_blocks to the text before it, then lexes the
// tag; block and comment ends eat one newline (trim_blocks) unless written `+%}`.
#include "tokenizer/jinja_lexer.h"

#include <utf8proc.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tokenizer/jinja_value.h"

namespace vela::jinja {
namespace {

int count_newlines(const std::string& s, size_t begin, size_t end) {
  int n = 0;
  for (size_t i = begin; i < end; ++i) n += s[i] == '\n';
  return n;
}

// Decodes the code point at s[i]; sets len to its byte length.
char32_t decode_at(const std::string& s, size_t i, size_t& len) {
  utf8proc_int32_t cp = 0;
  utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                        static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0) {
    len = 1;
    return 0xFFFD;
  }
  len = static_cast<size_t>(n);
  return static_cast<char32_t>(cp);
}

// Position after the Python whitespace (\s*) starting at pos.
size_t skip_space(const std::string& s, size_t pos) {
  while (pos < s.size()) {
    size_t len = 0;
    if (!is_py_space(decode_at(s, pos, len))) break;
    pos += len;
  }
  return pos;
}

// Python str.rstrip(): the length of s[begin, end) without trailing whitespace.
size_t rstrip_end(const std::string& s, size_t begin, size_t end) {
  std::u32string cps = utf8_decode(s.substr(begin, end - begin));
  size_t keep = cps.size();
  while (keep > 0 && is_py_space(cps[keep - 1])) --keep;
  return begin + utf8_encode(cps.substr(0, keep)).size();
}

bool all_space(const std::string& s, size_t begin, size_t end) {
  if (begin >= end) return false;  // \s+ needs at least one character
  for (char32_t cp : utf8_decode(s.substr(begin, end - begin)))
    if (!is_py_space(cp)) return false;
  return true;
}

bool starts_with(const std::string& s, size_t pos, const char* lit) {
  return s.compare(pos, std::strlen(lit), lit) == 0;
}

// Python's unicode-escape decoding of a string literal body.
std::string unescape(const std::string& body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out.push_back(c);
      continue;
    }
    char e = body[++i];
    auto hex = [&](size_t n) -> char32_t {
      char32_t v = 0;
      for (size_t k = 0; k < n; ++k) {
        size_t p = i + 1 + k;
        char h = p < body.size() ? body[p] : '\0';
        int d = (h >= '0' && h <= '9') ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) throw TemplateError("truncated \\" + std::string(1, e) + " escape", line);
        v = v * 16 + static_cast<char32_t>(d);
      }
      i += n;
      return v;
    };
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': utf8_append(out, hex(2)); break;
      case 'u': utf8_append(out, hex(4)); break;
      case 'U': {
        char32_t cp = hex(8);
        if (cp > 0x10FFFF) throw TemplateError("illegal Unicode character", line);
        utf8_append(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = static_cast<char32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k)
            v = v * 8 + static_cast<char32_t>(body[++i] - '0');
          utf8_append(out, v);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Matches digits with single underscores between them ((\d+_)*\d+); returns the end or pos.
size_t match_digits(const std::string& s, size_t pos) {
  size_t i = pos;
  if (i >= s.size() || !is_digit(s[i])) return pos;
  while (i < s.size() && is_digit(s[i])) {
    ++i;
    if (i + 1 < s.size() && s[i] == '_' && is_digit(s[i + 1])) ++i;
  }
  return i;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    size_t n = src_.size();
    while (pos_ < n) {
      size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit_data(pos_, n);
        break;
      }
      root_tag(tag);
    }
    push(Token::Type::kEof, "");
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '%' || src_[i + 1] == '{' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  void push(Token::Type type, std::string value) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.line = line_;
    tokens_.push_back(std::move(t));
  }

  void emit_data(size_t begin, size_t end) {
    if (end > begin) push(Token::Type::kData, src_.substr(begin, end - begin));
    line_ += count_newlines(src_, begin, end);
  }

  // Emits the text src_[begin, end) before a tag, stripped by `sign` or lstrip_blocks.
  void emit_text_before(size_t begin, size_t end, char sign, bool is_variable) {
    size_t keep = end;
    if (sign == '-') {
      keep = rstrip_end(src_, begin, end);
    } else if (sign != '+' && !is_variable) {
      size_t nl = src_.rfind('\n', end == 0 ? 0 : end - 1);
      size_t l_pos = (nl == std::string::npos || nl < begin) ? begin : nl + 1;
      if ((l_pos > begin || line_starting_) && all_space(src_, l_pos, end)) keep = l_pos;
    }
    if (keep > begin) push(Token::Type::kData, src_.substr(begin, keep - begin));
    line_ += count_newlines(src_, begin, end);
  }

  // Matches `{%[-+]?\s*raw\s*(-%}\s*|%})` or the endraw form at pos; returns the end or npos.
  size_t match_raw_tag(size_t pos, const char* word, char* sign_out, bool is_end) const {
    size_t i = pos + 2;
    char sign = 0;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) sign = src_[i++];
    i = skip_space(src_, i);
    if (!starts_with(src_, i, word)) return std::string::npos;
    i += std::strlen(word);
    if (i < src_.size() && is_name_char(src_[i])) return std::string::npos;
    i = skip_space(src_, i);
    if (sign_out) *sign_out = sign;
    if (starts_with(src_, i, "-%}")) return skip_space(src_, i + 3);
    if (is_end && starts_with(src_, i, "+%}")) return i + 3;
    if (starts_with(src_, i, "%}")) {
      i += 2;
      if (is_end && i < src_.size() && src_[i] == '\n') ++i;  // no trim after the raw opener
      return i;
    }
    return std::string::npos;
  }

  void root_tag(size_t tag) {
    char kind = src_[tag + 1];
    char sign = 0;
    if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) sign = src_[tag + 2];
    if (kind == '%') {
      char raw_sign = 0;
      size_t raw_end = match_raw_tag(tag, "raw", &raw_sign, false);
      if (raw_end != std::string::npos) {
        emit_text_before(pos_, tag, raw_sign, false);
        raw_block(tag, raw_end);
        return;
      }
    }
    emit_text_before(pos_, tag, sign, kind == '{');
    size_t after = tag + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      comment(after);
    } else {
      push(kind == '%' ? Token::Type::kBlockBegin : Token::Type::kVariableBegin, "");
      pos_ = after;
      line_starting_ = false;
      tag_body(kind == '%');
    }
  }

  void raw_block(size_t tag, size_t body_begin) {
    line_ += count_newlines(src_, tag, body_begin);
    line_starting_ = body_begin > 0 && src_[body_begin - 1] == '\n';
    for (size_t i = src_.find("{%", body_begin); i != std::string::npos; i = src_.find("{%", i + 1)) {
      char sign = 0;
      size_t end = match_raw_tag(i, "endraw", &sign, true);
      if (end == std::string::npos) continue;
      pos_ = body_begin;
      emit_text_before(body_begin, i, sign, false);
      line_ += count_newlines(src_, i, end);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    throw TemplateError("Missing end of raw directive", line_);
  }

  void comment(size_t body_begin) {
    for (size_t i = body_begin; i < src_.size(); ++i) {
      size_t end = std::string::npos;
      if (starts_with(src_, i, "+#}")) {
        end = i + 3;
      } else if (starts_with(src_, i, "-#}")) {
        end = skip_space(src_, i + 3);
      } else if (starts_with(src_, i, "#}")) {
        end = i + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      }
      if (end == std::string::npos) continue;
      line_ += count_newlines(src_, body_begin, end);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    throw TemplateError("Missing end of comment tag", line_);
  }

  void tag_body(bool is_block) {
    std::vector<char> balance;
    const size_t n = src_.size();
    while (pos_ < n) {
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (is_block) {
          if (starts_with(src_, pos_, "+%}")) {
            end = pos_ + 3;
          } else if (starts_with(src_, pos_, "-%}")) {
            end = skip_space(src_, pos_ + 3);
          } else if (starts_with(src_, pos_, "%}")) {
            end = pos_ + 2;
            if (end < n && src_[end] == '\n') ++end;
          }
        } else {
          if (starts_with(src_, pos_, "-}}")) end = skip_space(src_, pos_ + 3);
          else if (starts_with(src_, pos_, "}}")) end = pos_ + 2;
        }
        if (end != std::string::npos) {
          push(is_block ? Token::Type::kBlockEnd : Token::Type::kVariableEnd, "");
          line_ += count_newlines(src_, pos_, end);
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      char c = src_[pos_];
      size_t len = 0;
      if (is_py_space(decode_at(src_, pos_, len))) {
        size_t end = skip_space(src_, pos_);
        line_ += count_newlines(src_, pos_, end);
        pos_ = end;
        continue;
      }
      if (is_digit(c)) {
        lex_number();
        continue;
      }
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < n && is_name_char(src_[e])) ++e;
        push(Token::Type::kName, src_.substr(pos_, e - pos_));
        pos_ = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        lex_string(c);
        continue;
      }
      static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*",
                                         "%", "~", "[", "]", "(", ")", "{", "}", ">", "<",
                                         "=", ".", ":", "|", ",", ";"};
      const char* op = nullptr;
      for (const char* o : kOps) {
        if (starts_with(src_, pos_, o)) {
          op = o;
          break;
        }
      }
      if (!op) {
        std::string ch = src_.substr(pos_, len);
        throw TemplateError("unexpected char " + string_repr(ch) + " at " + std::to_string(pos_),
                            line_);
      }
      std::string o(op);
      if (o == "(" || o == "[" || o == "{") {
        balance.push_back(o == "(" ? ')' : o == "[" ? ']' : '}');
      } else if (o == ")" || o == "]" || o == "}") {
        if (balance.empty()) throw TemplateError("unexpected '" + o + "'", line_);
        char expected = balance.back();
        balance.pop_back();
        if (expected != o[0])
          throw TemplateError("unexpected '" + o + "', expected '" + std::string(1, expected) + "'",
                              line_);
      }
      push(Token::Type::kOperator, o);
      pos_ += o.size();
    }
  }

  void lex_number() {
    const size_t n = src_.size();
    bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot) {  // float: digits ((.digits)? e[+-]?digits | .digits)
      size_t i = match_digits(src_, pos_);
      size_t frac_end = i;
      if (i < n && src_[i] == '.') {
        size_t e = match_digits(src_, i + 1);
        if (e > i + 1) frac_end = e;
      }
      size_t end = std::string::npos;
      size_t j = frac_end;
      if (j < n && (src_[j] == 'e' || src_[j] == 'E')) {
        size_t k = j + 1;
        if (k < n && (src_[k] == '+' || src_[k] == '-')) ++k;
        size_t e = match_digits(src_, k);
        if (e > k) end = e;
      }
      if (end == std::string::npos && frac_end > i) end = frac_end;
      if (end != std::string::npos) {
        std::string text;
        for (size_t k = pos_; k < end; ++k)
          if (src_[k] != '_') text.push_back(src_[k]);
        push(Token::Type::kFloat, text);
        tokens_.back().float_value = std::strtod(text.c_str(), nullptr);
        pos_ = end;
        return;
      }
    }
    size_t i = pos_;
    int base = 10;
    if (src_[i] == '0' && i + 1 < n && std::strchr("bBoOxX", src_[i + 1])) {
      char p = static_cast<char>(src_[i + 1] | 0x20);
      base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
      i += 2;
      auto ok = [&](char c) {
        if (base == 2) return c == '0' || c == '1';
        if (base == 8) return c >= '0' && c <= '7';
        return std::isxdigit(static_cast<unsigned char>(c)) != 0;
      };
      size_t start = i;
      while (i < n && (ok(src_[i]) || (src_[i] == '_' && i + 1 < n && ok(src_[i + 1])))) ++i;
      if (i == start) {  // "0x" without digits: just the integer 0
        i = pos_ + 1;
        base = 10;
      }
    } else if (src_[i] == '0') {
      ++i;
      while (i < n && (src_[i] == '0' || (src_[i] == '_' && i + 1 < n && src_[i + 1] == '0'))) ++i;
    } else {
      i = match_digits(src_, i);
    }
    std::string text;
    for (size_t k = pos_ + (base == 10 ? 0 : 2); k < i; ++k)
      if (src_[k] != '_') text.push_back(src_[k]);
    push(Token::Type::kInteger, src_.substr(pos_, i - pos_));
    errno = 0;
    tokens_.back().int_value = static_cast<int64_t>(std::strtoull(text.c_str(), nullptr, base));
    if (errno == ERANGE) throw TemplateError("integer literal too large", line_);
    pos_ = i;
  }

  void lex_string(char quote) {
    size_t i = pos_ + 1;
    const size_t n = src_.size();
    while (i < n && src_[i] != quote) {
      if (src_[i] == '\\') ++i;
      ++i;
    }
    if (i >= n) throw TemplateError("unexpected char " + string_repr(std::string(1, quote)) +
                                        " at " + std::to_string(pos_), line_);
    std::string body = src_.substr(pos_ + 1, i - pos_ - 1);
    push(Token::Type::kString, unescape(body, line_));
    line_ += count_newlines(src_, pos_, i);
    pos_ = i + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src.push_back(source[i]);
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();  // keep_trailing_newline=False
  return Lexer(std::move(src)).run();
}

std::string describe_token(const Token& tok) {
  switch (tok.type) {
    case Token::Type::kData: return "template data";
    case Token::Type::kVariableBegin: return "begin of print statement";
    case Token::Type::kVariableEnd: return "end of print statement";
    case Token::Type::kBlockBegin: return "begin of statement block";
    case Token::Type::kBlockEnd: return "end of statement block";
    case Token::Type::kEof: return "end of template";
    case Token::Type::kString: return string_repr(tok.value);
    default: return "'" + tok.value + "'";
  }
}

}  // namespace vela::jinja
