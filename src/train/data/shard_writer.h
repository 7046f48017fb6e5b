// ShardWriter: appends sequences (packed documents) to shard files in a directory and writes the
// index. A shard is built in memory up to `shard_tokens` tokens, then written atomically
// (core/mmap_file.h AtomicFileWriter: temp file, fsync, rename); index.json is written last,
// atomically, so a directory with an index always describes complete shards. Rewriting a
// directory first removes its old index (a failed rerun leaves no index, never a stale one); stale
// shard files of the earlier run beyond the new count are removed after the new index is
// published.
// Not thread-safe; throws IoError when a file cannot be written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela {

// One document: its tokens and loss mask (1 = trained).
struct EncodedDoc {
  std::vector<int32_t> tokens;  // [n_tokens]
  std::vector<uint8_t> mask;    // [n_tokens]
};

// One training row: documents back to back.
struct PackedSequence {
  std::vector<int32_t> tokens;      // [n_tokens]
  std::vector<uint8_t> mask;        // [n_tokens]
  std::vector<int64_t> doc_starts;  // [n_docs] token offsets within the sequence; first is 0
};

class ShardWriter {
 public:
  ShardWriter(std::string dir, int64_t shard_tokens);

  void add(const PackedSequence& seq);
  // Flushes the last shard and writes index.json = `extra` (config, tokenizer, stats) plus
  // format, version, the shard list and totals. Returns the written index.
  json finish(json extra);

  int64_t n_tokens() const { return n_tokens_; }
  int64_t n_sequences() const { return n_sequences_; }
  int64_t n_docs() const { return n_docs_; }
  int64_t n_trained_tokens() const { return n_trained_; }
  int64_t max_sequence_tokens() const { return max_seq_tokens_; }

 private:
  void flush();

  std::string dir_;
  int64_t shard_tokens_;
  // The shard being built.
  std::vector<uint32_t> tokens_;
  std::vector<uint8_t> mask_;
  std::vector<uint64_t> seq_offsets_{0}, seq_doc_first_{0}, doc_offsets_;
  json shards_ = json::array();
  int64_t n_tokens_ = 0, n_sequences_ = 0, n_docs_ = 0, n_trained_ = 0, max_seq_tokens_ = 0;
};

}  // namespace vela
