// Pre-tokenizers (see pre_tokenizer.h). Splitting follows Hugging Face's NormalizedString::split:
// a pattern yields (range, is_match) pairs covering the text, the behavior decides what is kept and
// what is glued together, and empty results are dropped.
#include "tokenizer/pre_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace vela {
using tjson = nlohmann::json;  // tokenizer files: ordered_json parses big objects in O(n^2)

using Ranges = std::vector<std::pair<size_t, size_t>>;

void apply_split_behavior(const Ranges& match_ranges, size_t len, bool invert,
                          SplitBehavior behavior, Ranges& out) {
  // The (range, is_match) list covering [0, len), as Pattern::find_matches builds it.
  struct Seg {
    size_t b, e;
    bool m;
  };
  std::vector<Seg> segs;
  segs.reserve(match_ranges.size() * 2 + 1);
  if (len == 0) {
    segs.push_back({0, 0, false});
  } else {
    size_t prev = 0;
    for (auto [b, e] : match_ranges) {
      if (prev != b) segs.push_back({prev, b, false});
      segs.push_back({b, e, true});
      prev = e;
    }
    if (prev != len) segs.push_back({prev, len, false});
  }
  if (invert)
    for (auto& s : segs) s.m = !s.m;

  Ranges kept;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (auto& s : segs) kept.emplace_back(s.b, s.e);
      break;
    case SplitBehavior::kRemoved:
      for (auto& s : segs)
        if (!s.m) kept.emplace_back(s.b, s.e);
      break;
    case SplitBehavior::kContiguous: {
      bool prev_match = false;
      for (auto& s : segs) {
        if (s.m == prev_match && !kept.empty())
          kept.back().second = s.e;
        else
          kept.emplace_back(s.b, s.e);
        prev_match = s.m;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (auto& s : segs) {
        if (s.m && !prev_match && !kept.empty())
          kept.back().second = s.e;
        else
          kept.emplace_back(s.b, s.e);
        prev_match = s.m;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev_match = false;
      for (size_t k = segs.size(); k-- > 0;) {
        const Seg& s = segs[k];
        if (s.m && !prev_match && !kept.empty())
          kept.back().first = s.b;
        else
          kept.emplace_back(s.b, s.e);
        prev_match = s.m;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  for (auto r : kept)
    if (r.first != r.second) out.push_back(r);
}

namespace {

// Cuts `p` into the kept ranges that `find` computes for it and emits them.
template <typename Find>
void split_one(NormalizedText&& p, bool invert, SplitBehavior behavior, Find&& find,
               const PreTokenizer::Emit& emit) {
  Ranges matches, kept;
  find(p.text, matches);
  apply_split_behavior(matches, p.text.size(), invert, behavior, kept);
  if (kept.size() == 1 && kept[0].first == 0 && kept[0].second == p.text.size()) {
    emit(std::move(p));
    return;
  }
  for (auto [b, e] : kept) emit(NormalizedText{p.text.substr(b, e - b), p.at_origin && b == 0});
}

// Every code point satisfying `pred` is its own match (Pattern for Fn(char) -> bool).
template <typename Pred>
auto char_matcher(Pred pred) {
  return [pred](const std::string& s, Ranges& out) {
    size_t i = 0;
    while (i < s.size()) {
      size_t b = i;
      uint32_t c = unicode::next_cp(s, i);
      if (pred(c)) out.emplace_back(b, i);
    }
  };
}

SplitBehavior parse_behavior(const tjson& j) {
  VELA_CHECK(j.is_string(), "Split: 'behavior' must be a string");
  std::string b = j.get<std::string>();
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  VELA_THROW(InvalidArgument, "Split: unknown behavior '", b, "'");
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex re, SplitBehavior b, bool invert)
      : re_(std::move(re)), behavior_(b), invert_(invert) {}
  void pre_tokenize(NormalizedText&& p, const Emit& emit) const override {
    split_one(
        std::move(p), invert_, behavior_,
        [this](const std::string& s, Ranges& out) { re_.find_all(s, out); }, emit);
  }

 private:
  Regex re_;
  SplitBehavior behavior_;
  bool invert_;
};

constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {
    if (use_regex_) re_ = std::make_unique<Regex>(kGpt2Pattern);
  }
  void pre_tokenize(NormalizedText&& p, const Emit& emit) const override {
    if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
    auto map_emit = [&emit](NormalizedText&& w) {
      const auto& b2s = unicode::byte_to_utf8();
      std::string out;
      out.reserve(w.text.size() * 2);
      for (unsigned char c : w.text) out += b2s[c];
      w.text = std::move(out);
      emit(std::move(w));
    };
    if (use_regex_) {
      split_one(
          std::move(p), false, SplitBehavior::kIsolated,
          [this](const std::string& s, Ranges& out) { re_->find_all(s, out); }, map_emit);
    } else if (!p.text.empty()) {
      map_emit(std::move(p));
    }
  }
  bool is_byte_level() const override { return true; }

 private:
  bool add_prefix_space_, use_regex_;
  std::unique_ptr<Regex> re_;
};

class DigitsPreTokenizer final : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
  void pre_tokenize(NormalizedText&& p, const Emit& emit) const override {
    split_one(std::move(p), false,
              individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
              char_matcher(unicode::is_numeric), emit);
  }

 private:
  bool individual_;
};

// Whitespace: the words of \w+|[^\w\s]+ (Rust regex classes); whitespace is dropped.
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(NormalizedText&& p, const Emit& emit) const override {
    split_one(
        std::move(p), true, SplitBehavior::kRemoved,
        [](const std::string& s, Ranges& out) {
          size_t i = 0;
          int run = 0;  // 0 none, 1 word, 2 other
          size_t run_b = 0;
          while (i < s.size()) {
            size_t b = i;
            uint32_t c = unicode::next_cp(s, i);
            int kind = unicode::is_word_char(c) ? 1 : unicode::is_whitespace(c) ? 0 : 2;
            if (kind != run) {
              if (run != 0) out.emplace_back(run_b, b);
              run = kind;
              run_b = b;
            }
          }
          if (run != 0) out.emplace_back(run_b, s.size());
        },
        emit);
  }
};

class WhitespaceSplitPreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(NormalizedText&& p, const Emit& emit) const override {
    split_one(std::move(p), false, SplitBehavior::kRemoved, char_matcher(unicode::is_whitespace),
              emit);
  }
};

bool is_punctuation(uint32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  auto k = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

class PunctuationPreTokenizer final : public PreTokenizer {
 public:
  explicit PunctuationPreTokenizer(SplitBehavior b) : behavior_(b) {}
  void pre_tokenize(NormalizedText&& p, const Emit& emit) const override {
    split_one(std::move(p), false, behavior_, char_matcher(is_punctuation), emit);
  }

 private:
  SplitBehavior behavior_;
};

class BertPreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(NormalizedText&& p, const Emit& emit) const override {
    split_one(std::move(p), false, SplitBehavior::kRemoved, char_matcher(unicode::is_whitespace),
              [&emit](NormalizedText&& w) {
                split_one(std::move(w), false, SplitBehavior::kIsolated,
                          char_matcher(is_punctuation), emit);
              });
  }
};

enum class PrependScheme { kAlways, kNever, kFirst };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(uint32_t replacement, PrependScheme scheme, bool split)
      : rep_cp_(replacement), rep_(unicode::to_utf8(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(NormalizedText&& p, const Emit& emit) const override {
    std::string out;
    out.reserve(p.text.size() + rep_.size());
    for (char c : p.text) {
      if (c == ' ')
        out += rep_;
      else
        out += c;
    }
    bool starts = out.compare(0, rep_.size(), rep_) == 0;
    bool prepend = scheme_ == PrependScheme::kAlways  ? !starts
                   : scheme_ == PrependScheme::kFirst ? (!starts && p.at_origin)
                                                      : false;
    if (prepend) out.insert(0, rep_);
    p.text = std::move(out);
    if (split_) {
      uint32_t rc = rep_cp_;
      split_one(std::move(p), false, SplitBehavior::kMergedWithNext,
                char_matcher([rc](uint32_t c) { return c == rc; }), emit);
    } else if (!p.text.empty()) {
      emit(std::move(p));
    }
  }

 private:
  uint32_t rep_cp_;
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> v) : v_(std::move(v)) {}
  void pre_tokenize(NormalizedText&& p, const Emit& emit) const override {
    run(0, std::move(p), emit);
  }
  bool is_byte_level() const override {
    for (const auto& p : v_)
      if (p->is_byte_level()) return true;
    return false;
  }

 private:
  void run(size_t k, NormalizedText&& p, const Emit& emit) const {
    if (k == v_.size()) {
      emit(std::move(p));
      return;
    }
    v_[k]->pre_tokenize(std::move(p),
                        [this, k, &emit](NormalizedText&& w) { run(k + 1, std::move(w), emit); });
  }
  std::vector<std::unique_ptr<PreTokenizer>> v_;
};

uint32_t single_char(const tjson& j, const char* what) {
  VELA_CHECK(j.is_string(), what, " must be a one-character string");
  std::string s = j.get<std::string>();
  size_t i = 0;
  VELA_CHECK(!s.empty(), what, " must be a one-character string");
  uint32_t c = unicode::next_cp(s, i);
  VELA_CHECK(i == s.size(), what, " must be a one-character string, got '", s, "'");
  return c;
}

}  // namespace

std::vector<NormalizedText> PreTokenizer::pre_tokenize_all(
    std::vector<NormalizedText> pieces) const {
  std::vector<NormalizedText> out;
  for (auto& p : pieces)
    pre_tokenize(std::move(p), [&out](NormalizedText&& w) { out.push_back(std::move(w)); });
  return out;
}

std::unique_ptr<PreTokenizer> PreTokenizer::from_json(const tjson& j) {
  if (j.is_null()) return nullptr;
  VELA_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
             "pre_tokenizer must be an object with a 'type'");
  std::string type = j["type"].get<std::string>();
  if (type == "Split") {
    VELA_CHECK(j.contains("pattern") && j.contains("behavior"),
               "Split pre_tokenizer needs 'pattern' and 'behavior'");
    return std::make_unique<SplitPreTokenizer>(
        pattern_from_json(j["pattern"], "Split pre_tokenizer"), parse_behavior(j["behavior"]),
        j.value("invert", false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(j.value("add_prefix_space", true),
                                                   j.value("use_regex", true));
  if (type == "Digits")
    return std::make_unique<DigitsPreTokenizer>(j.value("individual_digits", false));
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplitPreTokenizer>();
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "Punctuation")
    return std::make_unique<PunctuationPreTokenizer>(
        j.contains("behavior") ? parse_behavior(j["behavior"]) : SplitBehavior::kIsolated);
  if (type == "Metaspace") {
    uint32_t rep = j.contains("replacement")
                       ? single_char(j["replacement"], "Metaspace 'replacement'")
                       : 0x2581;
    PrependScheme scheme = PrependScheme::kAlways;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      std::string s = j["prepend_scheme"].get<std::string>();
      if (s == "first")
        scheme = PrependScheme::kFirst;
      else if (s == "never")
        scheme = PrependScheme::kNever;
      else if (s == "always")
        scheme = PrependScheme::kAlways;
      else
        VELA_THROW(InvalidArgument, "Metaspace: unknown prepend_scheme '", s, "'");
    }
    if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() &&
        !j["add_prefix_space"].get<bool>())
      scheme = PrependScheme::kNever;
    bool split = j.contains("split") && j["split"].is_boolean() ? j["split"].get<bool>() : true;
    return std::make_unique<MetaspacePreTokenizer>(rep, scheme, split);
  }
  if (type == "Sequence") {
    VELA_CHECK(j.contains("pretokenizers") && j["pretokenizers"].is_array(),
               "Sequence pre_tokenizer needs a 'pretokenizers' array");
    std::vector<std::unique_ptr<PreTokenizer>> v;
    for (const auto& c : j["pretokenizers"]) {
      auto p = from_json(c);
      if (p) v.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(v));
  }
  VELA_THROW(Unsupported, "pre_tokenizer type '", type, "' is not supported");
}

}  // namespace vela
