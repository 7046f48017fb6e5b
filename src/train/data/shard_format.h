// The token shard file format (`shard_NNNNN.bin`, written by ShardWriter, read by ShardSet).
//
// One file per shard, little-endian, every section 64-byte aligned so it can be used in place
// from a memory map:
//   ShardHeader                      64 bytes
//   tokens        u32[n_tokens]      token ids, sequences back to back
//   loss_mask     u8[n_tokens]       1 = the token lies in a trained section (a target in sft)
//   seq_offsets   u64[n_sequences+1] token offset of each sequence; last = n_tokens
//   seq_doc_first u64[n_sequences+1] index of each sequence's first document; last = n_docs
//   doc_offsets   u64[n_docs+1]      token offset of each document start; last = n_tokens
// A sequence is one training row (<= seq_len tokens); a packed sequence holds several documents,
// and a document never straddles sequences. index.json beside the shards lists them with their
// counts and sha256 (see shard_writer.h).
#pragma once

#include <cstdint>

namespace vela {

inline constexpr char kShardMagic[8] = {'V', 'E', 'L', 'A', 'S', 'H', 'R', 'D'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr int kIndexVersion = 1;
inline constexpr const char* kIndexFileName = "index.json";

struct ShardHeader {
  char magic[8];
  uint32_t version;
  uint32_t token_bytes;  // 4
  uint64_t n_tokens;
  uint64_t n_sequences;
  uint64_t n_docs;
  uint64_t reserved[3];
};
static_assert(sizeof(ShardHeader) == 64, "ShardHeader must stay 64 bytes");

inline constexpr uint64_t shard_align(uint64_t n) { return (n + 63) & ~uint64_t{63}; }

// Byte offsets of the sections for the given counts.
struct ShardLayout {
  uint64_t tokens, loss_mask, seq_offsets, seq_doc_first, doc_offsets, file_bytes;
  static ShardLayout of(uint64_t n_tokens, uint64_t n_sequences, uint64_t n_docs) {
    ShardLayout l{};
    l.tokens = sizeof(ShardHeader);
    l.loss_mask = shard_align(l.tokens + 4 * n_tokens);
    l.seq_offsets = shard_align(l.loss_mask + n_tokens);
    l.seq_doc_first = shard_align(l.seq_offsets + 8 * (n_sequences + 1));
    l.doc_offsets = shard_align(l.seq_doc_first + 8 * (n_sequences + 1));
    l.file_bytes = l.doc_offsets + 8 * (n_docs + 1);
    return l;
  }
};

}  // namespace vela
