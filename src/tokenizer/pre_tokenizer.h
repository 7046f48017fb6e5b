// Pre-tokenizers of a tokenizer.json ("pre_tokenizer" field): Split (regex or literal, every
// behavior, invert), ByteLevel, Digits, Whitespace, WhitespaceSplit, Metaspace, Punctuation,
// Sequence. A pre-tokenizer cuts each piece of normalized text into smaller pieces (words) that the
// model tokenizes independently; empty pieces are dropped. Immutable and thread-safe once built.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "tokenizer/normalizer.h"

namespace vela {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Applies `behavior` to the (range, is_match) list that covers a text, giving the kept ranges.
void apply_split_behavior(const std::vector<std::pair<size_t, size_t>>& matches, size_t text_len,
                          bool invert, SplitBehavior behavior,
                          std::vector<std::pair<size_t, size_t>>& out);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  using Emit = std::function<void(NormalizedText&&)>;
  // Cuts `piece` and hands each non-empty sub-piece, in order, to `emit` (streaming, so a long
  // text never materializes all its words at once).
  virtual void pre_tokenize(NormalizedText&& piece, const Emit& emit) const = 0;
  // Convenience for tests: all the sub-pieces of `pieces`.
  std::vector<NormalizedText> pre_tokenize_all(std::vector<NormalizedText> pieces) const;
  // True for ByteLevel (alone or inside a Sequence): the model sees byte-level chars.
  virtual bool is_byte_level() const { return false; }
  // nullptr for JSON null; throws Unsupported naming an unknown type.
  static std::unique_ptr<PreTokenizer> from_json(const nlohmann::json& j);
};

}  // namespace vela
