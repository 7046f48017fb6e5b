// SpeculativeConfig: how the engine speculates (EngineConfig::speculative, `vela serve
// --speculative`). Parsed from "ngram,k=4[,ngram_max=3,ngram_min=1]", "draft=DIR[,k=4]" or "off";
// parse() and validate() throw InvalidArgument naming the bad key or value.
#pragma once

#include <cstdint>
#include <string>

namespace vela {

struct SpeculativeConfig {
  enum class Method { kNone, kNgram, kDraft };
  static constexpr int32_t kMaxDraftTokens = 16;

  Method method = Method::kNone;
  int32_t k = 4;          // draft tokens proposed per sequence and step, 1..kMaxDraftTokens
  int32_t ngram_max = 3;  // prompt lookup: longest suffix n-gram matched first
  int32_t ngram_min = 1;  // ... down to this length
  // kDraft: the draft model's directory (config.json + safetensors, tokenizer.json when present),
  // loaded by the Engine with the target's dtype and device. May be empty when the Engine is given
  // the draft Transformer directly.
  std::string draft_dir;

  bool enabled() const { return method != Method::kNone; }
  bool uses_draft_model() const { return method == Method::kDraft; }
  void validate() const;
  // "" or "off" / "none": disabled. "ngram" with optional ",key=value" pairs: k, ngram_max,
  // ngram_min. "draft=DIR" with optional k. Throws InvalidArgument naming the unknown method, key
  // or bad value.
  static SpeculativeConfig parse(const std::string& spec);
  // The canonical spelling ("off", "ngram,k=4,ngram_max=3,ngram_min=1", "draft=DIR,k=4"), for
  // logs and /stats.
  std::string describe() const;
};

}  // namespace vela
