// Truncation and packing: documents (after RecordEncoder) -> training sequences (rows).
//
// truncate_document() applies the max_length rule to one document: drop (too long -> rejected),
// truncate_right (keep the first max_length tokens), truncate_left (keep the last), split (cut
// into max_length pieces, each its own document). A piece is kept only when it still has a target
// (a trained token after its first position); otherwise the reason is "no_trained_tokens" (or
// "empty" for a document without tokens, "too_long" under drop).
//
// SequencePacker groups documents in arrival order into sequences of at most seq_len tokens
// (greedy next-fit: a document that does not fit closes the current sequence). Without packing
// every document is its own sequence. Document starts are recorded, so datasets restart positions
// and block attention at each boundary. Output order is input order: runs are reproducible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/data/preprocess_config.h"
#include "train/data/shard_writer.h"

namespace vela {

// Returns the pieces to keep (possibly none) and, when none, the reason in `bad_reason`.
std::vector<EncodedDoc> truncate_document(EncodedDoc doc, int64_t max_length, Truncation mode,
                                          std::string* bad_reason);

class SequencePacker {
 public:
  SequencePacker(int64_t seq_len, bool packing, ShardWriter& writer);
  void add(EncodedDoc&& doc);  // doc.tokens.size() <= seq_len
  void finish();               // flushes the open sequence

 private:
  void flush();
  int64_t seq_len_;
  bool packing_;
  ShardWriter& writer_;
  PackedSequence open_;
};

}  // namespace vela
