// Normalizers (see normalizer.h).
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace vela {
using tjson = nlohmann::json;  // tokenizer files: ordered_json parses big objects in O(n^2)

namespace {

#include "tokenizer/unicode_norm_exceptions.inc"

std::string utf8proc_normalize(std::string_view s, UnicodeForm form) {
  int opts = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeForm::kNfc:
      opts |= UTF8PROC_COMPOSE;
      break;
    case UnicodeForm::kNfd:
      opts |= UTF8PROC_DECOMPOSE;
      break;
    case UnicodeForm::kNfkc:
      opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case UnicodeForm::kNfkd:
      opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out,
                                    static_cast<utf8proc_option_t>(opts));
  VELA_CHECK(n >= 0, "unicode normalization failed: ", utf8proc_errmsg(n));
  std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

bool is_exception(uint32_t c, bool compat) {
  const uint32_t* b = compat ? std::begin(kCompatExceptions) : std::begin(kCanonicalExceptions);
  const uint32_t* e = compat ? std::end(kCompatExceptions) : std::end(kCanonicalExceptions);
  return std::binary_search(b, e, c);
}

}  // namespace

std::string normalize_unicode(std::string_view s, UnicodeForm form) {
  bool ascii = true;
  for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(s);  // every form leaves ASCII alone
  // Code points Hugging Face does not decompose stay as they are: normalize around them (they are
  // starters that compose with nothing, so the pieces are independent).
  bool compat = form == UnicodeForm::kNfkc || form == UnicodeForm::kNfkd;
  std::string out;
  size_t seg = 0, i = 0;
  while (i < s.size()) {
    size_t b = i;
    uint32_t c = unicode::next_cp(s, i);
    if (c >= 0x80 && is_exception(c, compat)) {
      if (b > seg) out += utf8proc_normalize(s.substr(seg, b - seg), form);
      out.append(s.data() + b, i - b);
      seg = i;
    }
  }
  if (seg == 0) return utf8proc_normalize(s, form);
  if (seg < s.size()) out += utf8proc_normalize(s.substr(seg), form);
  return out;
}

namespace {

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(UnicodeForm f) : form_(f) {}
  void normalize(NormalizedText& t) const override { t.text = normalize_unicode(t.text, form_); }

 private:
  UnicodeForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(NormalizedText& t) const override {
    std::string out;
    out.reserve(t.text.size());
    size_t i = 0;
    while (i < t.text.size()) unicode::append_lowercase(out, unicode::next_cp(t.text, i));
    t.text = std::move(out);
  }
};

// Replace: every non-overlapping match of a literal or regex pattern becomes `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Regex re, std::string content)
      : re_(std::move(re)), content_(std::move(content)) {}
  void normalize(NormalizedText& t) const override {
    std::vector<std::pair<size_t, size_t>> m;
    re_.find_all(t.text, m);
    if (m.empty()) return;
    std::string out;
    size_t prev = 0;
    for (auto [b, e] : m) {
      out.append(t.text, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(t.text, prev, std::string::npos);
    if (m[0].first == 0 && m[0].second > 0 && content_.empty()) t.at_origin = false;
    t.text = std::move(out);
  }

 private:
  Regex re_;
  std::string content_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(NormalizedText& t) const override {
    const std::string& s = t.text;
    size_t b = 0, e = s.size();
    if (left_) {
      size_t i = 0;
      while (i < s.size()) {
        size_t j = i;
        if (!unicode::is_whitespace(unicode::next_cp(s, j))) break;
        i = j;
      }
      b = i;
    }
    if (right_) {
      // Walk back over whitespace code points.
      size_t i = s.size();
      while (i > b) {
        size_t k = i - 1;
        while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        size_t j = k;
        if (!unicode::is_whitespace(unicode::next_cp(s, j))) break;
        i = k;
      }
      e = i;
    }
    if (b > 0) t.at_origin = false;
    t.text = s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string s) : s_(std::move(s)) {}
  void normalize(NormalizedText& t) const override {
    if (!t.text.empty()) t.text.insert(0, s_);
  }

 private:
  std::string s_;
};

class AppendNormalizer final : public Normalizer {
 public:
  explicit AppendNormalizer(std::string s) : s_(std::move(s)) {}
  void normalize(NormalizedText& t) const override {
    if (!t.text.empty()) t.text += s_;
  }

 private:
  std::string s_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> v) : v_(std::move(v)) {}
  void normalize(NormalizedText& t) const override {
    for (const auto& n : v_) n->normalize(t);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> v_;
};

std::string get_string(const tjson& j, const char* key, const char* what) {
  VELA_CHECK(j.contains(key) && j[key].is_string(), what, " needs a string field '", key, "'");
  return j[key].get<std::string>();
}

}  // namespace

// {"String": s} or {"Regex": r} as used by Split, Replace.
Regex pattern_from_json(const tjson& j, const char* what) {
  VELA_CHECK(j.is_object(), what, ": 'pattern' must be {\"String\": ...} or {\"Regex\": ...}");
  if (j.contains("String")) return Regex::literal(j["String"].get<std::string>());
  if (j.contains("Regex")) return Regex(j["Regex"].get<std::string>());
  VELA_THROW(InvalidArgument, what, ": 'pattern' must be {\"String\": ...} or {\"Regex\": ...}");
}

std::unique_ptr<Normalizer> Normalizer::from_json(const tjson& j) {
  if (j.is_null()) return nullptr;
  VELA_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
             "normalizer must be an object with a 'type'");
  std::string type = j["type"].get<std::string>();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Replace") {
    VELA_CHECK(j.contains("pattern"), "Replace normalizer needs a 'pattern'");
    return std::make_unique<ReplaceNormalizer>(
        pattern_from_json(j["pattern"], "Replace normalizer"),
        get_string(j, "content", "Replace normalizer"));
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(j.value("strip_left", true),
                                             j.value("strip_right", true));
  }
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(get_string(j, "prepend", "Prepend normalizer"));
  if (type == "Append")
    return std::make_unique<AppendNormalizer>(get_string(j, "append", "Append normalizer"));
  if (type == "Sequence") {
    VELA_CHECK(j.contains("normalizers") && j["normalizers"].is_array(),
               "Sequence normalizer needs a 'normalizers' array");
    std::vector<std::unique_ptr<Normalizer>> v;
    for (const auto& c : j["normalizers"]) {
      auto n = from_json(c);
      if (n) v.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(v));
  }
  VELA_THROW(Unsupported, "normalizer type '", type, "' is not supported");
}

}  // namespace vela
