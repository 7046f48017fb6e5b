// ShardSet: index.json + memory-mapped shard files, validated on open.
#include "train/data/shard_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/mmap_file.h"
#include "core/sha256.h"
#include "train/data/shard_format.h"

namespace vela {
namespace fs = std::filesystem;

std::shared_ptr<const ShardSet> ShardSet::open(const std::string& dir) {
  auto set = std::shared_ptr<ShardSet>(new ShardSet());
  set->dir_ = dir;
  fs::path index_path = fs::path(dir) / kIndexFileName;
  std::ifstream f(index_path, std::ios::binary);
  VELA_CHECK_T(IoError, f.good(), "cannot open '", index_path.string(),
               "' (is this a `vela preprocess` output directory?)");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    set->index_ = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    VELA_THROW(InvalidArgument, "'", index_path.string(), "' is not valid JSON: ", e.what());
  }
  const json& ix = set->index_;
  std::string where = index_path.string();
  VELA_CHECK(ix.is_object() && ix.value("format", "") == "vela-token-shards", "'", where,
             "' is not a vela token-shard index (format != vela-token-shards)");
  VELA_CHECK(ix.value("version", 0) == kIndexVersion, "'", where, "' has index version ",
             ix.value("version", 0), ", this vela reads version ", kIndexVersion);
  try {
    set->seq_len_ = ix.at("config").at("seq_len").get<int64_t>();
    for (const json& s : ix.at("shards")) {
      std::string file = s.at("file").get<std::string>();
      VELA_CHECK(file.find('/') == std::string::npos, "'", where, "' names shard '", file,
                 "' outside its directory");
      std::string path = (fs::path(dir) / file).string();
      Shard sh{};
      sh.file = MappedFile::open(path);
      const char* base = sh.file->data();
      VELA_CHECK(sh.file->size() >= sizeof(ShardHeader), "shard '", path, "' is truncated");
      ShardHeader h;
      std::memcpy(&h, base, sizeof(h));
      VELA_CHECK(std::memcmp(h.magic, kShardMagic, sizeof(h.magic)) == 0 &&
                     h.version == kShardVersion && h.token_bytes == 4,
                 "'", path, "' is not a vela token shard (bad magic or version)");
      VELA_CHECK(h.n_tokens == s.at("n_tokens").get<uint64_t>() &&
                     h.n_sequences == s.at("n_sequences").get<uint64_t>() &&
                     h.n_docs == s.at("n_docs").get<uint64_t>(),
                 "shard '", path, "' does not match its entry in index.json");
      ShardLayout l = ShardLayout::of(h.n_tokens, h.n_sequences, h.n_docs);
      VELA_CHECK(sh.file->size() == l.file_bytes, "shard '", path, "' has ", sh.file->size(),
                 " bytes, expected ", l.file_bytes, " (truncated or corrupt)");
      sh.tokens = reinterpret_cast<const uint32_t*>(base + l.tokens);
      sh.mask = reinterpret_cast<const uint8_t*>(base + l.loss_mask);
      sh.seq_offsets = reinterpret_cast<const uint64_t*>(base + l.seq_offsets);
      sh.seq_doc_first = reinterpret_cast<const uint64_t*>(base + l.seq_doc_first);
      sh.doc_offsets = reinterpret_cast<const uint64_t*>(base + l.doc_offsets);
      sh.n_sequences = static_cast<int64_t>(h.n_sequences);
      // Offsets must be monotone and in range: a corrupt file fails here, not in a batch.
      bool ok = sh.seq_offsets[0] == 0 && sh.seq_offsets[h.n_sequences] == h.n_tokens &&
                sh.seq_doc_first[0] == 0 && sh.seq_doc_first[h.n_sequences] == h.n_docs &&
                sh.doc_offsets[h.n_docs] == h.n_tokens;
      for (uint64_t i = 0; ok && i < h.n_sequences; ++i) {
        uint64_t d0 = sh.seq_doc_first[i], d1 = sh.seq_doc_first[i + 1];
        ok = sh.seq_offsets[i] < sh.seq_offsets[i + 1] && d0 < d1 &&
             sh.doc_offsets[d0] == sh.seq_offsets[i] &&
             static_cast<int64_t>(sh.seq_offsets[i + 1] - sh.seq_offsets[i]) <= set->seq_len_;
      }
      for (uint64_t d = 0; ok && d < h.n_docs; ++d) ok = sh.doc_offsets[d] < sh.doc_offsets[d + 1];
      VELA_CHECK(ok, "shard '", path, "' has inconsistent sequence/document offsets (corrupt)");
      set->first_seq_.push_back(set->n_sequences_);
      set->n_sequences_ += sh.n_sequences;
      set->n_tokens_ += static_cast<int64_t>(h.n_tokens);
      set->shards_.push_back(std::move(sh));
    }
  } catch (const json::exception& e) {
    VELA_THROW(InvalidArgument, "'", where, "' is malformed: ", e.what());
  }
  set->first_seq_.push_back(set->n_sequences_);
  VELA_CHECK(set->n_sequences_ > 0, "'", where, "' lists no sequences (every record was bad?)");
  return set;
}

SequenceView ShardSet::sequence(int64_t seq_idx) const {
  VELA_CHECK(seq_idx >= 0 && seq_idx < n_sequences_, "sequence index ", seq_idx,
             " out of range [0, ", n_sequences_, ")");
  size_t s = static_cast<size_t>(std::upper_bound(first_seq_.begin(), first_seq_.end(), seq_idx) -
                                 first_seq_.begin() - 1);
  const Shard& sh = shards_[s];
  int64_t i = seq_idx - first_seq_[s];
  SequenceView v;
  v.first_token = sh.seq_offsets[i];
  v.tokens = sh.tokens + v.first_token;
  v.mask = sh.mask + v.first_token;
  v.n_tokens = static_cast<int64_t>(sh.seq_offsets[i + 1] - sh.seq_offsets[i]);
  v.doc_offsets = sh.doc_offsets + sh.seq_doc_first[i];
  v.n_docs = static_cast<int64_t>(sh.seq_doc_first[i + 1] - sh.seq_doc_first[i]);
  return v;
}

void ShardSet::verify_checksums() const {
  for (size_t s = 0; s < shards_.size(); ++s) {
    const json& e = index_["shards"][s];
    std::string want = e.value("sha256", "");
    std::string got = sha256_hex(shards_[s].file->data(), shards_[s].file->size());
    VELA_CHECK(want == got, "shard '", shards_[s].file->path(), "' has sha256 ", got,
               " but index.json records ", want, " (corrupt or replaced)");
  }
}

}  // namespace vela
