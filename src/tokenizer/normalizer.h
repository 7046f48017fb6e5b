// Normalizers of a tokenizer.json ("normalizer" field): NFC, NFD, NFKC, NFKD, Lowercase, Replace,
// Strip, Prepend, Append, Sequence. Each rewrites one piece of text in place, exactly as Hugging
// Face tokenizers does. Built once from JSON, then immutable and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "tokenizer/regex.h"

namespace vela {

// The text being normalized plus whether it still starts at offset 0 of the original input (what
// Metaspace's prepend_scheme "first" looks at).
struct NormalizedText {
  std::string text;
  bool at_origin = true;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(NormalizedText& t) const = 0;
  // Builds from a tokenizer.json "normalizer" object; nullptr for JSON null. Throws Unsupported
  // naming an unknown type, InvalidArgument for malformed fields.
  static std::unique_ptr<Normalizer> from_json(const nlohmann::json& j);
};

enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };
// Applies a Unicode normalization form (utf8proc) to valid UTF-8.
std::string normalize_unicode(std::string_view s, UnicodeForm form);

}  // namespace vela
