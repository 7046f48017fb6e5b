// TokenVocab: byte strings of the tokenizer's tokens, sorted for the trie walk.
#include "engine/constrain/token_vocab.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace vela::constrain {

TokenVocab::TokenVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids)
    : bytes_(std::move(token_bytes)), end_ids_(std::move(end_ids)) {
  for (int32_t e : end_ids_)
    VELA_CHECK(e >= 0 && e < size(), "TokenVocab: end token id ", e,
               " is outside the vocabulary [0, ", size(), ")");
  std::sort(end_ids_.begin(), end_ids_.end());
  end_ids_.erase(std::unique(end_ids_.begin(), end_ids_.end()), end_ids_.end());
  sorted_.reserve(bytes_.size());
  for (int32_t i = 0; i < static_cast<int32_t>(bytes_.size()); ++i) {
    if (bytes_[static_cast<size_t>(i)].empty() || is_end(i)) continue;
    sorted_.push_back(i);
    max_len_ = std::max(max_len_, bytes_[static_cast<size_t>(i)].size());
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    const std::string& x = bytes_[static_cast<size_t>(a)];
    const std::string& y = bytes_[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  flat_off_.push_back(0);
  for (int32_t id : sorted_) {
    flat_ += bytes_[static_cast<size_t>(id)];
    flat_off_.push_back(flat_.size());
  }
  lcp_.assign(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& x = bytes_[static_cast<size_t>(sorted_[i - 1])];
    const std::string& y = bytes_[static_cast<size_t>(sorted_[i])];
    size_t n = 0;
    while (n < x.size() && n < y.size() && x[n] == y[n]) ++n;
    lcp_[i] = static_cast<int32_t>(n);
  }
}

bool TokenVocab::is_end(int32_t id) const {
  return std::binary_search(end_ids_.begin(), end_ids_.end(), id);
}

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tok,
                                                             int64_t vocab_size,
                                                             std::vector<int32_t> end_ids) {
  VELA_CHECK(vocab_size > 0, "TokenVocab: vocab_size must be positive, got ", vocab_size);
  const bool byte_level = tok.token_to_id("\xC4\xA0").has_value();  // "Ġ", GPT-2's space
  const bool byte_fallback = tok.token_to_id("<0x0A>").has_value();
  std::vector<std::string> bytes(static_cast<size_t>(vocab_size));
  const int32_t n_tok = std::min<int32_t>(tok.vocab_size(), static_cast<int32_t>(vocab_size));
  for (int32_t id = 0; id < n_tok; ++id) {
    if (tok.is_special(id)) continue;
    std::optional<std::string> t = tok.id_to_token(id);
    if (!t || t->empty()) continue;
    std::string out;
    if (byte_fallback && t->size() == 6 && t->compare(0, 3, "<0x") == 0 && (*t)[5] == '>') {
      out += static_cast<char>(std::stoi(t->substr(3, 2), nullptr, 16));
    } else if (byte_level) {
      size_t i = 0;
      bool ok = unicode::find_invalid_utf8(*t) == std::string::npos;
      while (ok && i < t->size()) {
        int b = unicode::cp_to_byte(unicode::next_cp(*t, i));
        if (b < 0)
          ok = false;
        else
          out += static_cast<char>(b);
      }
      if (!ok) out = *t;  // an added token with real characters keeps its text (as the decoder)
    } else {
      // SentencePiece: U+2581 is a space.
      static const std::string kSpace = "\xE2\x96\x81";
      for (size_t i = 0; i < t->size();) {
        if (t->compare(i, kSpace.size(), kSpace) == 0) {
          out += ' ';
          i += kSpace.size();
        } else {
          out += (*t)[i++];
        }
      }
    }
    bytes[static_cast<size_t>(id)] = std::move(out);
  }
  return std::make_shared<TokenVocab>(std::move(bytes), std::move(end_ids));
}

}  // namespace vela::constrain
