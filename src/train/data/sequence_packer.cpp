// Truncation modes and greedy next-fit packing of documents into sequences.
#include "train/data/sequence_packer.h"

#include <algorithm>

#include "core/error.h"

namespace vela {
namespace {

// A document can be trained on when some token after the first is a target.
bool has_target(const EncodedDoc& d) {
  return std::any_of(d.mask.begin() + std::min<size_t>(1, d.mask.size()), d.mask.end(),
                     [](uint8_t m) { return m != 0; });
}

EncodedDoc piece(const EncodedDoc& d, size_t begin, size_t end) {
  EncodedDoc p;
  p.tokens.assign(d.tokens.begin() + begin, d.tokens.begin() + end);
  p.mask.assign(d.mask.begin() + begin, d.mask.begin() + end);
  return p;
}

}  // namespace

std::vector<EncodedDoc> truncate_document(EncodedDoc doc, int64_t max_length, Truncation mode,
                                          std::string* bad_reason) {
  VELA_ASSERT(doc.tokens.size() == doc.mask.size() && max_length > 0);
  std::vector<EncodedDoc> out;
  size_t n = doc.tokens.size(), max_len = static_cast<size_t>(max_length);
  if (n == 0) {
    *bad_reason = "empty";
    return out;
  }
  if (n <= max_len) {
    out.push_back(std::move(doc));
  } else {
    switch (mode) {
      case Truncation::kDrop:
        *bad_reason = "too_long";
        return out;
      case Truncation::kTruncateRight:
        out.push_back(piece(doc, 0, max_len));
        break;
      case Truncation::kTruncateLeft:
        out.push_back(piece(doc, n - max_len, n));
        break;
      case Truncation::kSplit:
        for (size_t b = 0; b < n; b += max_len)
          out.push_back(piece(doc, b, std::min(n, b + max_len)));
        break;
    }
  }
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const EncodedDoc& d) { return !has_target(d); }),
      out.end());
  if (out.empty()) *bad_reason = "no_trained_tokens";
  return out;
}

SequencePacker::SequencePacker(int64_t seq_len, bool packing, ShardWriter& writer, int64_t window)
    : seq_len_(seq_len),
      packing_(packing),
      window_(packing ? std::max<int64_t>(window, 1) : 1),
      writer_(writer) {}

void SequencePacker::add(EncodedDoc&& doc) {
  const int64_t n = static_cast<int64_t>(doc.tokens.size());
  VELA_ASSERT(n > 0 && n <= seq_len_);
  auto it = open_.begin();
  if (packing_)
    while (it != open_.end() && static_cast<int64_t>(it->tokens.size()) + n > seq_len_) ++it;
  else
    it = open_.end();
  if (it == open_.end()) {
    if (static_cast<int64_t>(open_.size()) == window_) {
      writer_.add(open_.front());
      open_.pop_front();
    }
    open_.emplace_back();
    it = std::prev(open_.end());
  }
  it->doc_starts.push_back(static_cast<int64_t>(it->tokens.size()));
  it->tokens.insert(it->tokens.end(), doc.tokens.begin(), doc.tokens.end());
  it->mask.insert(it->mask.end(), doc.mask.begin(), doc.mask.end());
  if (static_cast<int64_t>(it->tokens.size()) == seq_len_) {
    writer_.add(*it);
    open_.erase(it);
  }
}

void SequencePacker::finish() {
  for (const PackedSequence& s : open_) writer_.add(s);
  open_.clear();
}

}  // namespace vela
