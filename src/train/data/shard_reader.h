// ShardSet: the token shards of one `vela preprocess` output directory, memory-mapped read-only
// (train/data/shard_format.h). Sequences are numbered globally across shards in index order.
// open() validates the index and every shard header and size against it (a truncated or foreign
// file is an InvalidArgument naming it); verify_checksums() additionally rehashes each shard.
// Immutable after open(): all methods are const and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela {

class MappedFile;

// A sequence in place in its shard's mapping (valid while the ShardSet lives).
struct SequenceView {
  const uint32_t* tokens = nullptr;  // [n_tokens]
  const uint8_t* mask = nullptr;     // [n_tokens]
  int64_t n_tokens = 0;
  const uint64_t* doc_offsets = nullptr;  // [n_docs + 1] shard token offsets; [0] = this sequence's
  int64_t n_docs = 0;                     // first token, [n_docs] = the next document's start
  uint64_t first_token = 0;               // shard token offset of tokens[0]
};

class ShardSet {
 public:
  static std::shared_ptr<const ShardSet> open(const std::string& dir);

  int64_t n_sequences() const { return n_sequences_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t seq_len() const { return seq_len_; }  // the config's seq_len (rows are <= this)
  const json& index() const { return index_; }
  const std::string& dir() const { return dir_; }

  SequenceView sequence(int64_t seq_idx) const;
  // Rehashes every shard file and compares with index.json; throws InvalidArgument on mismatch.
  void verify_checksums() const;

 private:
  struct Shard {
    std::shared_ptr<MappedFile> file;
    const uint32_t* tokens;
    const uint8_t* mask;
    const uint64_t* seq_offsets;
    const uint64_t* seq_doc_first;
    const uint64_t* doc_offsets;
    int64_t n_sequences;
  };
  std::string dir_;
  json index_;
  std::vector<Shard> shards_;
  std::vector<int64_t> first_seq_;  // [n_shards + 1] global index of each shard's first sequence
  int64_t n_sequences_ = 0, n_tokens_ = 0, seq_len_ = 0;
};

}  // namespace vela
