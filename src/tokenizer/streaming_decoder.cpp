// StreamingDecoder (see streaming_decoder.h).
#include "tokenizer/streaming_decoder.h"

#include "tokenizer/tokenizer.h"

namespace vela {
namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && std::string_view(s).substr(s.size() - 3) == kReplacement;
}
}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamingDecoder::decode_range(size_t begin, size_t end) const {
  std::vector<int32_t> w(ids_.begin() + static_cast<std::ptrdiff_t>(begin),
                         ids_.begin() + static_cast<std::ptrdiff_t>(end));
  return tokenizer_.decode(w, skip_special_);
}

std::string StreamingDecoder::push(int32_t id) {
  ids_.push_back(id);
  std::string text = decode_range(prefix_idx_, ids_.size());
  // A trailing U+FFFD is (usually) a character whose bytes are still arriving: hold it back.
  if (text.size() <= prefix_text_.size() || ends_with_replacement(text)) return "";
  std::string out;
  if (text.compare(0, prefix_text_.size(), prefix_text_) == 0) {
    out = text.substr(prefix_text_.size());
  } else {
    // The window's earlier text changed (a decoder that is not local): fall back to the full text.
    std::string full = tokenizer_.decode(ids_, skip_special_);
    if (ends_with_replacement(full) || full.size() < emitted_.size() ||
        full.compare(0, emitted_.size(), emitted_) != 0)
      return "";
    out = full.substr(emitted_.size());
  }
  prefix_idx_ = read_idx_;
  read_idx_ = ids_.size();
  prefix_text_ = decode_range(prefix_idx_, read_idx_);
  emitted_ += out;
  return out;
}

std::string StreamingDecoder::flush() {
  std::string full = tokenizer_.decode(ids_, skip_special_);
  std::string out;
  if (full.size() >= emitted_.size() && full.compare(0, emitted_.size(), emitted_) == 0)
    out = full.substr(emitted_.size());
  emitted_ += out;
  prefix_idx_ = read_idx_ = ids_.size();
  prefix_text_.clear();
  return out;
}

void StreamingDecoder::reset() {
  ids_.clear();
  prefix_idx_ = read_idx_ = 0;
  prefix_text_.clear();
  emitted_.clear();
}

}  // namespace vela
