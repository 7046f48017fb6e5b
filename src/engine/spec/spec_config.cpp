// SpeculativeConfig parsing and validation.
#include "engine/spec/spec_config.h"

#include <charconv>
#include <vector>

#include "core/error.h"

namespace vela {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

int32_t parse_int(const std::string& key, const std::string& value) {
  int32_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  VELA_CHECK(ec == std::errc() && end == value.data() + value.size() && !value.empty(),
             "--speculative: ", key, " must be an integer, got '", value, "'");
  return v;
}

}  // namespace

void SpeculativeConfig::validate() const {
  if (!enabled()) return;
  VELA_CHECK(k >= 1 && k <= kMaxDraftTokens, "speculative k must be in [1, ", kMaxDraftTokens,
             "], got ", k);
  if (method == Method::kDraft) return;
  VELA_CHECK(ngram_min >= 1 && ngram_min <= ngram_max && ngram_max <= 64,
             "speculative n-gram lengths need 1 <= ngram_min <= ngram_max <= 64, got ngram_min ",
             ngram_min, ", ngram_max ", ngram_max);
}

SpeculativeConfig SpeculativeConfig::parse(const std::string& spec) {
  SpeculativeConfig c;
  if (spec.empty() || spec == "off" || spec == "none") return c;
  std::vector<std::string> parts = split(spec, ',');
  if (parts[0] == "ngram" || parts[0] == "prompt_lookup") {
    c.method = Method::kNgram;
  } else if (parts[0].rfind("draft=", 0) == 0 || parts[0] == "draft") {
    c.method = Method::kDraft;
    c.draft_dir = parts[0] == "draft" ? "" : parts[0].substr(6);
    VELA_CHECK(!c.draft_dir.empty(),
               "--speculative: draft needs the draft model's directory: draft=DIR[,k=N]");
  } else {
    VELA_THROW(InvalidArgument, "--speculative: unknown method '", parts[0],
               "' (supported: ngram[,k=N,ngram_max=N,ngram_min=N], draft=DIR[,k=N], off)");
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& kv = parts[i];
    size_t eq = kv.find('=');
    VELA_CHECK(eq != std::string::npos, "--speculative: expected key=value, got '", kv, "'");
    std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "k")
      c.k = parse_int(key, value);
    else if (c.method == Method::kDraft)
      VELA_THROW(InvalidArgument, "--speculative: unknown key '", key, "' for draft (known: k)");
    else if (key == "ngram_max" || key == "n")
      c.ngram_max = parse_int(key, value);
    else if (key == "ngram_min")
      c.ngram_min = parse_int(key, value);
    else
      VELA_THROW(InvalidArgument, "--speculative: unknown key '", key,
                 "' for ngram (known: k, ngram_max, ngram_min)");
  }
  if (c.ngram_min > c.ngram_max) c.ngram_min = c.ngram_max;  // "n=1" alone means exactly 1
  c.validate();
  return c;
}

std::string SpeculativeConfig::describe() const {
  if (!enabled()) return "off";
  if (method == Method::kDraft) return "draft=" + draft_dir + ",k=" + std::to_string(k);
  return "ngram,k=" + std::to_string(k) + ",ngram_max=" + std::to_string(ngram_max) +
         ",ngram_min=" + std::to_string(ngram_min);
}

}  // namespace vela
