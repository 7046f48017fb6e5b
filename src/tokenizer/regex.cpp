// PCRE2-backed Regex with Oniguruma-compatible matching (see regex.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <cstring>
#include <map>

#include "core/error.h"

namespace vela {
using tjson = nlohmann::json;  // tokenizer files: ordered_json parses big objects in O(n^2)
namespace {

// White_Space, as Oniguruma's \s (PCRE2's \s also accepts U+180E).
constexpr const char* kSpaceItems =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
    "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

const std::map<std::string, std::string>& unicode_delta() {
  static const std::map<std::string, std::string> m = {
#include "tokenizer/unicode_delta.inc"
  };
  return m;
}

// The class items (no brackets) for \p{name}: the property plus the code points PCRE2's older
// tables lack.
std::string property_items(const std::string& name, bool negated) {
  std::string items = std::string(negated ? "\\P{" : "\\p{") + name + "}";
  if (negated) return items;
  auto it = unicode_delta().find(name);
  if (it != unicode_delta().end()) items += it->second;
  return items;
}

}  // namespace

std::string translate_regex(const std::string& p) {
  std::string out;
  out.reserve(p.size() * 2);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size() && p[i + 1] == 'Q') {  // \Q...\E is literal: copy verbatim
      size_t end = p.find("\\E", i + 2);
      end = end == std::string::npos ? p.size() : end + 2;
      out.append(p, i, end - i);
      i = end - 1;
      continue;
    }
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      if (n == 's' || n == 'S') {
        if (in_class) {
          if (n == 's')
            out += kSpaceItems;
          else
            out += "\\S";  // a negated set inside a class cannot be spelled out; keep PCRE2's
        } else {
          out += n == 's' ? "[" : "[^";
          out += kSpaceItems;
          out += "]";
        }
        ++i;
        continue;
      }
      if ((n == 'p' || n == 'P') && i + 2 < p.size() && p[i + 2] == '{') {
        size_t close = p.find('}', i + 3);
        if (close != std::string::npos) {
          std::string name = p.substr(i + 3, close - i - 3);
          bool neg = n == 'P';
          if (!name.empty() && name[0] == '^') {
            neg = !neg;
            name = name.substr(1);
          }
          std::string items = property_items(name, false);
          if (in_class) {
            out += neg ? property_items(name, true) : items;
          } else {
            out += neg ? "[^" : "[";
            out += items;
            out += "]";
          }
          i = close;
          continue;
        }
      }
      out += c;
      out += n;
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') {
        out += '^';
        ++i;
      }
      if (i + 1 < p.size() && p[i + 1] == ']') {
        out += ']';
        ++i;
      }
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX [:alpha:]
      size_t close = p.find(":]", i + 2);
      if (close != std::string::npos) {
        out.append(p, i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

namespace {
// Per-thread scratch: match data big enough for any pattern's group 0 and a large JIT stack
// (long whitespace runs with lookahead recurse deeply).
struct ThreadScratch {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadScratch() {
    md = pcre2_match_data_create(1, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(mctx, nullptr, jit_stack);
  }
  ~ThreadScratch() {
    pcre2_match_data_free(md);
    pcre2_match_context_free(mctx);
    pcre2_jit_stack_free(jit_stack);
  }
};
ThreadScratch& scratch() {
  thread_local ThreadScratch s;
  return s;
}
}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern), impl_(std::make_unique<Impl>()) {
  std::string translated = translate_regex(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NO_UTF_CHECK, &err,
                              &err_off, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    VELA_THROW(InvalidArgument, "regex '", pattern,
               "' does not compile: ", reinterpret_cast<const char*>(buf), " (at offset ", err_off,
               ")");
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex Regex::literal(std::string_view lit) {
  std::string p = "\\Q";
  // \Q..\E cannot contain \E: split it.
  for (size_t i = 0; i < lit.size(); ++i) {
    if (lit[i] == '\\' && i + 1 < lit.size() && lit[i + 1] == 'E') {
      p += "\\E\\\\\\QE";
      ++i;
    } else {
      p += lit[i];
    }
  }
  p += "\\E";
  return Regex(p);
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  ThreadScratch& s = scratch();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (start <= text.size()) {
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), start,
                                          PCRE2_NO_UTF_CHECK, s.md, s.mctx)
                        : pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                      s.md, s.mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof(buf));
      VELA_THROW(InvalidArgument, "regex '", pattern_,
                 "' failed: ", reinterpret_cast<const char*>(buf));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    size_t b = ov[0], e = ov[1];
    if (b == e && have_last && last_end == e) {
      // Oniguruma's find_iter: no empty match right after the previous match; step one char.
      if (start >= text.size()) break;
      unsigned char ch = static_cast<unsigned char>(text[start]);
      start += ch < 0x80 ? 1 : ch < 0xE0 ? 2 : ch < 0xF0 ? 3 : 4;
      continue;
    }
    out.emplace_back(b, e);
    have_last = true;
    last_end = e;
    if (e == b) {
      // An empty match: the next search starts at the same place but may not be empty there.
      start = e;
      if (start >= text.size()) break;
      // Oniguruma retries from e with the "no empty match at last end" rule above.
      continue;
    }
    start = e;
  }
}

}  // namespace vela
