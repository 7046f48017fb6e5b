// Token shards: ShardWriter -> ShardSet round trip across several shards, the index, checksum
// verification, corruption detection and stale-shard cleanup.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "data_test_util.h"
#include "train/data/shard_reader.h"
#include "train/data/shard_writer.h"

namespace vela {
namespace {

PackedSequence make_seq(int seed, int n_docs) {
  PackedSequence s;
  for (int d = 0; d < n_docs; ++d) {
    s.doc_starts.push_back(static_cast<int64_t>(s.tokens.size()));
    int len = 2 + (seed * 7 + d * 3) % 9;
    for (int t = 0; t < len; ++t) {
      s.tokens.push_back(seed * 1000 + d * 100 + t + 151000);  // ids above 2^17: u32 storage
      s.mask.push_back(static_cast<uint8_t>((t + d) % 2));
    }
  }
  return s;
}

std::vector<PackedSequence> write_some(const std::string& dir, int n, int64_t shard_tokens,
                                       json* index = nullptr) {
  ShardWriter w(dir, shard_tokens);
  std::vector<PackedSequence> seqs;
  for (int i = 0; i < n; ++i) {
    seqs.push_back(make_seq(i, 1 + i % 3));
    w.add(seqs.back());
  }
  json ix = w.finish({{"config", {{"seq_len", 64}}}});
  if (index) *index = ix;
  return seqs;
}

TEST(Shards, RoundTripAcrossShards) {
  test::TempDir tmp;
  json ix;
  auto seqs = write_some(tmp.path().string(), 40, 50, &ix);
  EXPECT_GT(ix["shards"].size(), 3u);
  auto set = ShardSet::open(tmp.path().string());
  ASSERT_EQ(set->n_sequences(), 40);
  int64_t total = 0;
  for (int i = 0; i < 40; ++i) {
    SequenceView v = set->sequence(i);
    const PackedSequence& s = seqs[static_cast<size_t>(i)];
    ASSERT_EQ(v.n_tokens, static_cast<int64_t>(s.tokens.size()));
    ASSERT_EQ(v.n_docs, static_cast<int64_t>(s.doc_starts.size()));
    for (int64_t t = 0; t < v.n_tokens; ++t) {
      EXPECT_EQ(static_cast<int32_t>(v.tokens[t]), s.tokens[static_cast<size_t>(t)]);
      EXPECT_EQ(v.mask[t], s.mask[static_cast<size_t>(t)]);
    }
    for (int64_t d = 0; d < v.n_docs; ++d)
      EXPECT_EQ(static_cast<int64_t>(v.doc_offsets[d] - v.first_token),
                s.doc_starts[static_cast<size_t>(d)]);
    EXPECT_EQ(static_cast<int64_t>(v.doc_offsets[v.n_docs] - v.first_token), v.n_tokens);
    total += v.n_tokens;
  }
  EXPECT_EQ(total, set->n_tokens());
  EXPECT_EQ(ix["n_tokens"], total);
  EXPECT_EQ(ix["n_sequences"], 40);
  set->verify_checksums();
  EXPECT_THROW(set->sequence(40), InvalidArgument);
}

TEST(Shards, CorruptionIsDetected) {
  test::TempDir tmp;
  write_some(tmp.path().string(), 10, 1000);
  std::string shard = tmp / "shard_00000.bin";
  {  // a flipped token byte: the checksum catches it
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(70);
    f.put('\x7f');
  }
  auto set = ShardSet::open(tmp.path().string());
  EXPECT_THROW(set->verify_checksums(), InvalidArgument);
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 8);
  try {
    ShardSet::open(tmp.path().string());
    FAIL() << "a truncated shard must not open";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("truncated or corrupt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ShardSet::open((tmp.path() / "nope").string()), IoError);
}

TEST(Shards, RerunRemovesStaleShards) {
  test::TempDir tmp;
  write_some(tmp.path().string(), 40, 50);
  EXPECT_TRUE(std::filesystem::exists(tmp / "shard_00003.bin"));
  write_some(tmp.path().string(), 3, 1000);
  EXPECT_TRUE(std::filesystem::exists(tmp / "shard_00000.bin"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "shard_00001.bin"));
  EXPECT_EQ(ShardSet::open(tmp.path().string())->n_sequences(), 3);
}

}  // namespace
}  // namespace vela
