// The shared string scorers (see scorers.h). Regexes go straight to PCRE2 (the tokenizer's Regex
// wrapper returns whole matches only; extract_regex needs capture groups).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "eval/scorers.h"

#include <pcre2.h>

#include <algorithm>
#include <list>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json.h"

namespace vela::scoring {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ascii_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_ascii_punct(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return u >= 0x21 && u <= 0x7e && !is_ascii_alnum(c);
}
char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// A compiled PCRE2 pattern with its match data (one per thread through the cache below).
struct Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  uint32_t n_groups = 0;
  Compiled() = default;
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  ~Compiled() {
    if (match != nullptr) pcre2_match_data_free(match);
    if (code != nullptr) pcre2_code_free(code);
  }
};

std::unique_ptr<Compiled> compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &err_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    VELA_THROW(InvalidArgument, "bad answer regex '", pattern,
               "': ", reinterpret_cast<const char*>(buf), " at offset ", err_offset);
  }
  auto c = std::make_unique<Compiled>();
  c->code = code;
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort: the interpreter is the fallback
  pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &c->n_groups);
  c->match = pcre2_match_data_create_from_pattern(code, nullptr);
  VELA_CHECK_T(OutOfMemory, c->match != nullptr, "PCRE2 match data allocation failed");
  return c;
}

// A small per-thread LRU of compiled patterns: RL rewards and eval tasks call extract_regex with
// the same few patterns millions of times.
Compiled& cached(const std::string& pattern) {
  constexpr size_t kMaxEntries = 16;
  thread_local std::list<std::pair<std::string, std::unique_ptr<Compiled>>> cache;
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (it->first == pattern) {
      cache.splice(cache.begin(), cache, it);
      return *cache.front().second;
    }
  }
  auto compiled = compile(pattern);  // throws before the cache is touched
  cache.emplace_front(pattern, std::move(compiled));
  if (cache.size() > kMaxEntries) cache.pop_back();
  return *cache.front().second;
}

// Byte ranges [begin, end) of each number (see extract_last_number) in `text`, in order.
// "-?(\d{1,3}(,\d{3})+(?!\d)|\d+)(\.\d+)?" or "-?\.\d+", where the number may not continue a
// preceding digit or point and '-' must not follow a digit.
std::vector<std::pair<size_t, size_t>> find_numbers(std::string_view t) {
  std::vector<std::pair<size_t, size_t>> out;
  const size_t n = t.size();
  size_t i = 0;
  auto digits_from = [&](size_t j) {
    while (j < n && is_digit(t[j])) ++j;
    return j;
  };
  while (i < n) {
    bool starts_int = is_digit(t[i]);
    bool starts_frac = t[i] == '.' && i + 1 < n && is_digit(t[i + 1]);
    if (!starts_int && !starts_frac) {
      ++i;
      continue;
    }
    if (i > 0 && (is_digit(t[i - 1]) || t[i - 1] == '.')) {  // inside "1.2.3"-like runs
      i = digits_from(i + (starts_frac ? 1 : 0));
      continue;
    }
    size_t begin = i;
    if (i > 0 && t[i - 1] == '-' && !(i > 1 && is_digit(t[i - 2]))) begin = i - 1;
    size_t end = i;
    if (starts_int) {
      size_t run = digits_from(i);
      end = run;
      if (run - i <= 3) {  // try thousands groups: ",ddd" repeated, not followed by a digit
        size_t j = run;
        size_t grouped = run;
        while (j + 4 <= n && t[j] == ',' && digits_from(j + 1) == j + 4) {
          j += 4;
          grouped = j;
        }
        if (grouped != run) end = grouped;
      }
    }
    if (end < n && t[end] == '.' && end + 1 < n && is_digit(t[end + 1])) end = digits_from(end + 1);
    out.emplace_back(begin, end);
    i = end;
  }
  return out;
}

}  // namespace

std::string normalize_answer(std::string_view text) {
  // lowercase + drop punctuation, then split on whitespace, drop articles, join with one space.
  std::string cleaned;
  cleaned.reserve(text.size());
  for (char c : text)
    if (!is_ascii_punct(c)) cleaned += ascii_lower(c);
  std::string out;
  out.reserve(cleaned.size());
  size_t i = 0;
  while (i < cleaned.size()) {
    while (i < cleaned.size() && is_space(cleaned[i])) ++i;
    size_t j = i;
    while (j < cleaned.size() && !is_space(cleaned[j])) ++j;
    if (j > i) {
      std::string_view word(cleaned.data() + i, j - i);
      if (word != "a" && word != "an" && word != "the") {
        if (!out.empty()) out += ' ';
        out += word;
      }
    }
    i = j;
  }
  return out;
}

bool exact_match(std::string_view pred, std::string_view ref, bool normalize) {
  if (normalize) return normalize_answer(pred) == normalize_answer(ref);
  return trim(pred) == trim(ref);
}

std::optional<std::string> canonical_number(std::string_view s) {
  auto spans = find_numbers(s);
  if (spans.size() != 1 || spans[0].first != 0 || spans[0].second != s.size()) return std::nullopt;
  bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  std::string int_part;
  std::string frac_part;
  size_t point = s.find('.');
  for (char c : s.substr(0, point))
    if (c != ',') int_part += c;
  if (point != std::string_view::npos) frac_part = std::string(s.substr(point + 1));
  size_t first_nonzero = int_part.find_first_not_of('0');
  int_part = first_nonzero == std::string::npos ? "0" : int_part.substr(first_nonzero);
  while (!frac_part.empty() && frac_part.back() == '0') frac_part.pop_back();
  std::string out;
  if (negative && !(int_part == "0" && frac_part.empty())) out += '-';
  out += int_part;
  if (!frac_part.empty()) out += "." + frac_part;
  return out;
}

std::optional<std::string> extract_last_number(std::string_view text) {
  auto spans = find_numbers(text);
  if (spans.empty()) return std::nullopt;
  auto [b, e] = spans.back();
  return canonical_number(text.substr(b, e - b));
}

std::optional<std::string> extract_gsm8k_answer(std::string_view text) {
  size_t marker = text.rfind("####");
  if (marker != std::string_view::npos) {
    std::string_view rest = text.substr(marker + 4);
    auto spans = find_numbers(rest);
    if (!spans.empty()) {
      auto [b, e] = spans.front();
      return canonical_number(rest.substr(b, e - b));
    }
  }
  return extract_last_number(text);
}

std::optional<std::string> extract_regex(std::string_view text, const std::string& pattern,
                                         int group) {
  Compiled& re = cached(pattern);
  VELA_CHECK(group >= 0 && static_cast<uint32_t>(group) <= re.n_groups, "answer regex '", pattern,
             "' has ", re.n_groups, " capture group(s); group ", group, " was asked for");
  int rc = pcre2_match(re.code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0,
                       re.match, nullptr);
  if (rc < 0) return std::nullopt;  // no match (or a match error on pathological input)
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(re.match);
  if (rc <= group || ov[2 * group] == PCRE2_UNSET) return std::nullopt;
  return std::string(text.substr(ov[2 * group], ov[2 * group + 1] - ov[2 * group]));
}

namespace {
std::vector<std::string_view> rouge_tokens(std::string_view s, std::string& lowered) {
  lowered.resize(s.size());
  std::transform(s.begin(), s.end(), lowered.begin(), ascii_lower);
  std::vector<std::string_view> out;
  size_t i = 0;
  auto is_tok = [](char c) { return is_ascii_alnum(c) || static_cast<unsigned char>(c) >= 0x80; };
  while (i < lowered.size()) {
    while (i < lowered.size() && !is_tok(lowered[i])) ++i;
    size_t j = i;
    while (j < lowered.size() && is_tok(lowered[j])) ++j;
    if (j > i) out.emplace_back(lowered.data() + i, j - i);
    i = j;
  }
  return out;
}
}  // namespace

double rouge_l_f1(std::string_view pred, std::string_view ref) {
  std::string pred_lower, ref_lower;
  auto p = rouge_tokens(pred, pred_lower);
  auto r = rouge_tokens(ref, ref_lower);
  if (p.empty() || r.empty()) return 0.0;
  // LCS by dynamic programming over one rolling row: O(n_pred * n_ref) time, O(n_ref) memory.
  std::vector<size_t> row(r.size() + 1, 0);
  for (size_t i = 1; i <= p.size(); ++i) {
    size_t diag = 0;  // row[j-1] of the previous i
    for (size_t j = 1; j <= r.size(); ++j) {
      size_t up = row[j];
      row[j] = p[i - 1] == r[j - 1] ? diag + 1 : std::max(row[j], row[j - 1]);
      diag = up;
    }
  }
  double lcs = static_cast<double>(row[r.size()]);
  if (lcs == 0) return 0.0;
  double precision = lcs / static_cast<double>(p.size());
  double recall = lcs / static_cast<double>(r.size());
  return 2 * precision * recall / (precision + recall);
}

bool is_valid_json(std::string_view text) { return nlohmann::json::accept(text); }

}  // namespace vela::scoring
