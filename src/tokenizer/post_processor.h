// Post-processors of a tokenizer.json ("post_processor" field): TemplateProcessing (single and
// pair templates with their special tokens), BertProcessing, RobertaProcessing, ByteLevel (offsets
// only: a no-op for ids) and Sequence. They add special tokens around encoded sequences when
// encode() is called with add_special_tokens. Immutable and thread-safe once built.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Rewrites `ids` (sequence A, and B when `pair` is non-null) into the final sequence.
  virtual void process(std::vector<int32_t>& ids, const std::vector<int32_t>* pair) const = 0;
  // Ids the single-sequence template puts before / after the text (for bos/eos discovery).
  virtual std::vector<int32_t> prefix_ids() const { return {}; }
  virtual std::vector<int32_t> suffix_ids() const { return {}; }
  static std::unique_ptr<PostProcessor> from_json(const nlohmann::json& j);
};

}  // namespace vela
