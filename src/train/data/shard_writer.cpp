// ShardWriter: in-memory shard buffers -> atomically written shard files + index.json.
#include "train/data/shard_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/mmap_file.h"
#include "core/sha256.h"
#include "train/data/shard_format.h"

namespace vela {
namespace fs = std::filesystem;

namespace {

std::string shard_name(size_t idx) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "shard_%05zu.bin", idx);
  return buf;
}

// Writes bytes to the file and the hash, then zero padding up to `to` bytes written.
class HashedWriter {
 public:
  explicit HashedWriter(const std::string& path) : w_(path) {}
  void write(const void* p, size_t n) {
    if (n == 0) return;
    w_.write(p, n);
    sha_.update(p, n);
  }
  void pad_to(uint64_t to) {
    static const char kZeros[64] = {};
    uint64_t at = w_.n_bytes_written();
    VELA_ASSERT(to >= at && to - at < 64);
    write(kZeros, to - at);
  }
  std::string commit() {
    w_.commit();
    return sha_.hex_digest();
  }

 private:
  AtomicFileWriter w_;
  Sha256 sha_;
};

}  // namespace

ShardWriter::ShardWriter(std::string dir, int64_t shard_tokens)
    : dir_(std::move(dir)), shard_tokens_(shard_tokens) {
  VELA_CHECK(shard_tokens_ > 0, "shard_tokens must be positive");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  VELA_CHECK_T(IoError, !ec && fs::is_directory(dir_), "cannot create output directory '", dir_,
               "': ", ec.message());
  // An earlier run's index would describe shards this run is about to replace: drop it first, so
  // a run that fails midway leaves a directory without an index (unusable, and saying so) rather
  // than an index over mixed shards.
  fs::remove(fs::path(dir_) / kIndexFileName, ec);
  VELA_CHECK_T(IoError, !ec, "cannot remove the old index in '", dir_, "': ", ec.message());
}

void ShardWriter::add(const PackedSequence& seq) {
  VELA_ASSERT(seq.tokens.size() == seq.mask.size() && !seq.tokens.empty());
  VELA_ASSERT(!seq.doc_starts.empty() && seq.doc_starts[0] == 0);
  if (!tokens_.empty() && static_cast<int64_t>(tokens_.size() + seq.tokens.size()) > shard_tokens_)
    flush();
  uint64_t base = tokens_.size();
  for (int64_t d : seq.doc_starts) doc_offsets_.push_back(base + static_cast<uint64_t>(d));
  for (int32_t t : seq.tokens) tokens_.push_back(static_cast<uint32_t>(t));
  mask_.insert(mask_.end(), seq.mask.begin(), seq.mask.end());
  seq_offsets_.push_back(tokens_.size());
  seq_doc_first_.push_back(doc_offsets_.size());
  int64_t n = static_cast<int64_t>(seq.tokens.size());
  n_tokens_ += n;
  n_sequences_ += 1;
  n_docs_ += static_cast<int64_t>(seq.doc_starts.size());
  for (uint8_t m : seq.mask) n_trained_ += m != 0;
  max_seq_tokens_ = std::max(max_seq_tokens_, n);
}

void ShardWriter::flush() {
  if (tokens_.empty()) return;
  uint64_t n_tok = tokens_.size(), n_seq = seq_offsets_.size() - 1, n_doc = doc_offsets_.size();
  std::vector<uint64_t> doc_offsets = doc_offsets_;
  doc_offsets.push_back(n_tok);
  ShardLayout l = ShardLayout::of(n_tok, n_seq, n_doc);
  ShardHeader h{};
  std::memcpy(h.magic, kShardMagic, sizeof(h.magic));
  h.version = kShardVersion;
  h.token_bytes = 4;
  h.n_tokens = n_tok;
  h.n_sequences = n_seq;
  h.n_docs = n_doc;

  std::string name = shard_name(shards_.size());
  HashedWriter w((fs::path(dir_) / name).string());
  w.write(&h, sizeof(h));
  w.write(tokens_.data(), 4 * n_tok);
  w.pad_to(l.loss_mask);
  w.write(mask_.data(), n_tok);
  w.pad_to(l.seq_offsets);
  w.write(seq_offsets_.data(), 8 * (n_seq + 1));
  w.pad_to(l.seq_doc_first);
  w.write(seq_doc_first_.data(), 8 * (n_seq + 1));
  w.pad_to(l.doc_offsets);
  w.write(doc_offsets.data(), 8 * (n_doc + 1));
  std::string sha = w.commit();
  shards_.push_back({{"file", name},
                     {"n_tokens", n_tok},
                     {"n_sequences", n_seq},
                     {"n_docs", n_doc},
                     {"bytes", l.file_bytes},
                     {"sha256", sha}});
  tokens_.clear();
  mask_.clear();
  seq_offsets_.assign(1, 0);
  seq_doc_first_.assign(1, 0);
  doc_offsets_.clear();
}

json ShardWriter::finish(json extra) {
  flush();
  json index;
  index["format"] = "vela-token-shards";
  index["version"] = kIndexVersion;
  index["token_dtype"] = "u32";
  index["n_tokens"] = n_tokens_;
  index["n_trained_tokens"] = n_trained_;
  index["n_docs"] = n_docs_;
  index["n_sequences"] = n_sequences_;
  index["max_sequence_tokens"] = max_seq_tokens_;
  for (auto it = extra.begin(); it != extra.end(); ++it) index[it.key()] = it.value();
  index["shards"] = shards_;
  std::string text = index.dump(2) + "\n";
  write_file_atomic((fs::path(dir_) / kIndexFileName).string(), text.data(), text.size());
  // Shards of an earlier, larger run into the same directory are no longer referenced.
  for (size_t i = shards_.size();; ++i) {
    fs::path stale = fs::path(dir_) / shard_name(i);
    std::error_code ec;
    if (!fs::remove(stale, ec)) break;
  }
  return index;
}

}  // namespace vela
