// Sampler and dataset order: seeded permutations, exact resume from state() JSON, the
// validation split, data-parallel ranks and bad states.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "data_test_util.h"
#include "train/data/dataset.h"
#include "train/data/sampler.h"
#include "train/data/shard_writer.h"

namespace vela {
namespace {

TEST(EpochSampler, SeededPermutations) {
  EpochSampler a(1000, 42, true), b(1000, 42, true), c(1000, 43, true);
  auto e0 = a.order(0), e1 = a.order(1);
  EXPECT_EQ(e0, b.order(0));
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, c.order(0));
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  for (int64_t i = 0; i < 1000; i += 97) EXPECT_EQ(a.item(1, i), e1[static_cast<size_t>(i)]);
  EpochSampler plain(5, 42, false);
  EXPECT_EQ(plain.order(3), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // Pinned values, computed independently in Python from the Philox-4x32-10 definition
  // (Fisher-Yates from the top, j = (u32 * (i + 1)) >> 32): the order must not change between
  // vela versions, or a resume across an upgrade would see different data.
  EXPECT_EQ(EpochSampler::permutation(8, 1, 0), (std::vector<int64_t>{1, 0, 4, 2, 5, 3, 6, 7}));
  EXPECT_EQ(EpochSampler::permutation(10, 1234, 3),
            (std::vector<int64_t>{1, 4, 8, 3, 7, 0, 2, 5, 9, 6}));
}

// 23 sequences of distinct content: sequence i is [1000 + i, ...] with 2 + i % 5 tokens.
std::string make_shards(const test::TempDir& tmp) {
  ShardWriter w(tmp.path().string(), 20);
  for (int i = 0; i < 23; ++i) {
    PackedSequence s;
    s.doc_starts = {0};
    for (int t = 0; t < 2 + i % 5; ++t) {
      s.tokens.push_back(1000 + 10 * i + t);
      s.mask.push_back(1);
    }
    w.add(s);
  }
  w.finish({{"config", {{"seq_len", 8}}}});
  return tmp.path().string();
}

std::vector<int32_t> first_ids(const TrainBatch& b) {
  std::vector<int32_t> out;
  auto ids = b.ids.to_vector<int32_t>();
  for (int64_t r = 0; r < b.ids.size(0); ++r)
    out.push_back(ids[static_cast<size_t>(r * b.ids.size(1))]);
  return out;
}

bool same(const TrainBatch& a, const TrainBatch& b) {
  return a.ids.to_vector<int32_t>() == b.ids.to_vector<int32_t>() &&
         a.targets.to_vector<int32_t>() == b.targets.to_vector<int32_t>() &&
         a.doc_ids.to_vector<int32_t>() == b.doc_ids.to_vector<int32_t>() &&
         a.positions.to_vector<int32_t>() == b.positions.to_vector<int32_t>() &&
         a.n_target_tokens == b.n_target_tokens;
}

TEST(Dataset, EpochVisitsEverySequenceOnce) {
  test::TempDir tmp;
  DatasetConfig c;
  c.path = make_shards(tmp);
  c.batch_size = 4;
  c.seed = 7;
  auto ds = make_datasets(c).train;
  EXPECT_EQ(ds->batches_per_epoch(), 6);  // 23 / 4, last batch padded
  std::multiset<int32_t> seen;
  for (int b = 0; b < 6; ++b)
    for (int32_t id : first_ids(ds->next_batch()))
      if (id != kPadTokenId) seen.insert(id);
  EXPECT_EQ(seen.size(), 23u);
  EXPECT_EQ(std::set<int32_t>(seen.begin(), seen.end()).size(), 23u);
  EXPECT_EQ(ds->epoch(), 1);
  EXPECT_EQ(ds->cursor(), 0);
}

TEST(Dataset, ResumeIsExact) {
  test::TempDir tmp;
  DatasetConfig c;
  c.path = make_shards(tmp);
  c.batch_size = 3;
  c.seed = 1234;
  const int kSteps = 20, kStop = 9;  // crosses two epoch boundaries (8 batches per epoch)
  auto straight = make_datasets(c).train;
  std::vector<TrainBatch> want;
  for (int i = 0; i < kSteps; ++i) want.push_back(straight->next_batch());

  auto first = make_datasets(c).train;
  for (int i = 0; i < kStop; ++i)
    ASSERT_TRUE(same(first->next_batch(), want[static_cast<size_t>(i)]));
  std::string saved = first->state().dump();  // what a checkpoint stores
  auto resumed = make_datasets(c).train;
  resumed->restore(json::parse(saved));
  EXPECT_EQ(resumed->epoch(), 1);
  EXPECT_EQ(resumed->cursor(), 1);
  for (int i = kStop; i < kSteps; ++i)
    EXPECT_TRUE(same(resumed->next_batch(), want[static_cast<size_t>(i)])) << "batch " << i;
  // batch(epoch, idx) is the same pure function.
  EXPECT_TRUE(same(resumed->batch(0, 2), want[2]));
}

TEST(Dataset, RestoreRejectsAnotherDataset) {
  test::TempDir tmp;
  DatasetConfig c;
  c.path = make_shards(tmp);
  c.batch_size = 3;
  auto ds = make_datasets(c).train;
  json s = ds->state();
  DatasetConfig other = c;
  other.seed = 99;
  EXPECT_THROW(make_datasets(other).train->restore(s), InvalidArgument);
  other = c;
  other.batch_size = 4;
  EXPECT_THROW(make_datasets(other).train->restore(s), InvalidArgument);
  other = c;
  other.kind = "sft";
  EXPECT_THROW(make_datasets(other).train->restore(s), InvalidArgument);
  json bad = s;
  bad["cursor"] = 1000;
  EXPECT_THROW(ds->restore(bad), InvalidArgument);
  EXPECT_THROW(ds->restore(json{{"kind", "seq"}}), InvalidArgument);
}

TEST(Dataset, ValidationSplitIsDisjointAndStable) {
  test::TempDir tmp;
  DatasetConfig c;
  c.path = make_shards(tmp);
  c.batch_size = 2;
  c.validation_fraction = 0.2;
  DatasetSplit s = make_datasets(c);
  ASSERT_TRUE(s.validation);
  EXPECT_EQ(s.validation->n_sequences(), 5);  // round(0.2 * 23)
  EXPECT_EQ(s.train->n_sequences(), 18);
  std::set<int32_t> val, train;
  for (int64_t b = 0; b < s.validation->batches_per_epoch(); ++b)
    for (int32_t id : first_ids(s.validation->batch(0, b)))
      if (id) val.insert(id);
  for (int64_t b = 0; b < s.train->batches_per_epoch(); ++b)
    for (int32_t id : first_ids(s.train->batch(0, b)))
      if (id) train.insert(id);
  EXPECT_EQ(val.size(), 5u);
  EXPECT_EQ(train.size(), 18u);
  for (int32_t v : val) EXPECT_EQ(train.count(v), 0u);
  // Same seed, same split; validation order is fixed (no shuffle).
  DatasetSplit again = make_datasets(c);
  EXPECT_TRUE(same(again.validation->batch(0, 0), s.validation->batch(0, 0)));
  c.validation_fraction = 0.99;
  EXPECT_THROW(make_datasets(c), InvalidArgument);
  c.validation_fraction = 0.1;
  c.validation_path = c.path;
  EXPECT_THROW(make_datasets(c), InvalidArgument);
}

TEST(Dataset, RanksPartitionTheGlobalBatch) {
  test::TempDir tmp;
  DatasetConfig c;
  c.path = make_shards(tmp);
  c.seed = 5;
  c.batch_size = 4;
  auto single = make_datasets(c).train;
  c.batch_size = 2;
  c.world_size = 2;
  c.rank = 0;
  auto r0 = make_datasets(c).train;
  c.rank = 1;
  auto r1 = make_datasets(c).train;
  ASSERT_EQ(r0->batches_per_epoch(), single->batches_per_epoch());
  for (int64_t b = 0; b < single->batches_per_epoch(); ++b) {
    auto all = first_ids(single->batch(0, b)), a = first_ids(r0->batch(0, b)),
         z = first_ids(r1->batch(0, b));
    EXPECT_EQ((std::multiset<int32_t>{all.begin(), all.end()}),
              (std::multiset<int32_t>{a[0], a[1], z[0], z[1]}));
  }
}

TEST(DatasetConfig, StrictJson) {
  DatasetConfig c =
      DatasetConfig::from_json({{"kind", "sft"}, {"path", "d"}, {"batch_size", 2}, {"seed", 3}});
  EXPECT_EQ(c.kind, "sft");
  EXPECT_EQ(c.seed, 3u);
  EXPECT_EQ(DatasetConfig::from_json(c.to_json()).to_json(), c.to_json());
  EXPECT_THROW(DatasetConfig::from_json({{"batchsize", 2}}), InvalidArgument);
  EXPECT_THROW(DatasetConfig::from_json({{"batch_size", "2"}}), InvalidArgument);
  EXPECT_THROW(DatasetConfig::from_json({{"seed", -1}}), InvalidArgument);
  DatasetConfig k;
  k.kind = "dpo";
  k.path = "x";
  EXPECT_THROW(make_datasets(k), InvalidArgument);
}

}  // namespace
}  // namespace vela
