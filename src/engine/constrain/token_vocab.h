// TokenVocab: the model's vocabulary as raw byte strings, the view constrained decoding needs.
// Token ids are sorted by their bytes with the longest common prefix of each neighbour pair, so a
// matcher walks the vocabulary as a trie: shared prefixes are matched once and a rejected prefix
// skips every token under it. Tokens with no bytes (special tokens, ids past the tokenizer) are
// never allowed by a grammar; the end tokens (EOS and stop ids) are allowed exactly when the
// grammar may terminate. Immutable after construction, thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vela {
class Tokenizer;
}

namespace vela::constrain {

class TokenVocab {
 public:
  // token_bytes[id] = the bytes the token decodes to ("" = never produced by a grammar).
  TokenVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids);

  // Byte strings of a Hugging Face tokenizer: byte-level BPE tokens through the GPT-2 byte
  // alphabet, SentencePiece-style tokens with "\u2581" as space and <0xNN> byte tokens, added
  // tokens as their text. Special tokens and ids in [tokenizer.vocab_size(), vocab_size) are empty.
  static std::shared_ptr<const TokenVocab> from_tokenizer(const Tokenizer& tok, int64_t vocab_size,
                                                          std::vector<int32_t> end_ids);

  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  int64_t n_words() const { return (size() + 31) / 32; }  // bitmask words of 32 tokens
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& sorted() const { return sorted_; }  // ids ordered by bytes
  const std::vector<int32_t>& lcp() const { return lcp_; }  // lcp of sorted[i-1] and sorted[i]
  // The bytes of sorted()[i], stored contiguously in sorted order (a sequential walk).
  std::string_view sorted_bytes(size_t i) const {
    return std::string_view(flat_.data() + flat_off_[i], flat_off_[i + 1] - flat_off_[i]);
  }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }
  bool is_end(int32_t id) const;
  size_t max_token_bytes() const { return max_len_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> sorted_, lcp_, end_ids_;
  std::string flat_;              // sorted tokens' bytes back to back
  std::vector<size_t> flat_off_;  // [sorted.size() + 1]
  size_t max_len_ = 0;
};

}  // namespace vela::constrain
