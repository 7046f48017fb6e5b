// StreamingDecoder: incremental detokenization for streaming generation (SSE, stop strings).
// push(id) returns the text that became final with this token: never half a UTF-8 character,
// and the concatenation of every push() and flush() equals Tokenizer::decode(all ids) exactly.
// Like Hugging Face's DecodeStream and vLLM's incremental detokenizer it decodes a short window
// of recent tokens and diffs against the window's previous text, so decoders that rewrite the
// first token (Metaspace's leading space) and byte tokens that complete a character later both
// work. Not thread-safe (one per stream); the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vela {

class Tokenizer;

class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Adds one token; returns the newly completed text (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is still held back (an incomplete character decodes to U+FFFD, as decode()).
  std::string flush();
  // Forgets all tokens.
  void reset();

  const std::string& text() const { return emitted_; }  // everything returned so far
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::string decode_range(size_t begin, size_t end) const;

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_idx_ = 0;    // window start: context tokens already emitted
  size_t read_idx_ = 0;      // tokens before this index are emitted
  std::string prefix_text_;  // decode of [prefix_idx_, read_idx_)
  std::string emitted_;
};

}  // namespace vela
