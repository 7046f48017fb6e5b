// Regex: a compiled PCRE2 pattern (UTF + UCP + JIT) that finds matches the way the Hugging Face
// tokenizers engine (Oniguruma, Ruby syntax) does: `^`/`$` match at line breaks, \s is Unicode
// White_Space, \p{..} general categories follow Unicode 16 (see unicode_delta.inc), and an empty
// match right after the previous match is skipped. Immutable after construction; find_all is
// thread-safe (match data and JIT stack are per thread).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"

namespace vela {

class Regex {
 public:
  // Throws InvalidArgument (with the PCRE2 message and offset) when the pattern does not compile.
  explicit Regex(const std::string& pattern);
  // A regex matching `literal` exactly.
  static Regex literal(std::string_view literal);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Appends the [begin, end) byte ranges of the successive non-overlapping matches in `text`
  // (valid UTF-8, not re-checked).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::string pattern_;
  std::unique_ptr<Impl> impl_;
};

// A tokenizer.json pattern: {"String": literal} or {"Regex": pattern}. `what` names the owner
// for error messages.
Regex pattern_from_json(const nlohmann::json& j, const char* what);

// Rewrites an HF/Oniguruma pattern for PCRE2 (exposed for tests): \s, \S and \p{X} expanded.
std::string translate_regex(const std::string& pattern);

}  // namespace vela
