// Truncation modes, next-fit packing, and the rows datasets build from packed sequences:
// positions restart and targets stop at document boundaries; sft masks prompt tokens.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data_test_util.h"
#include "train/data/dataset.h"
#include "train/data/sequence_packer.h"
#include "train/data/shard_reader.h"

namespace vela {
namespace {

EncodedDoc doc(std::vector<int32_t> tokens, std::vector<uint8_t> mask = {}) {
  if (mask.empty()) mask.assign(tokens.size(), 1);
  return EncodedDoc{std::move(tokens), std::move(mask)};
}

TEST(Truncation, Modes) {
  std::string why;
  auto d = doc({1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(truncate_document(d, 5, Truncation::kDrop, &why).empty());
  EXPECT_EQ(why, "too_long");
  auto r = truncate_document(d, 5, Truncation::kTruncateRight, &why);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].tokens, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  auto l = truncate_document(d, 5, Truncation::kTruncateLeft, &why);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].tokens, (std::vector<int32_t>{3, 4, 5, 6, 7}));
  auto s = truncate_document(d, 3, Truncation::kSplit, &why);
  ASSERT_EQ(s.size(), 2u);  // [7] alone has no target and is dropped
  EXPECT_EQ(s[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(s[1].tokens, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(truncate_document(d, 7, Truncation::kDrop, &why).size(), 1u);  // fits: kept whole
  why.clear();
  EXPECT_TRUE(truncate_document(doc({}), 4, Truncation::kSplit, &why).empty());
  EXPECT_EQ(why, "empty");
  // truncate_right keeping only the (masked) prompt leaves nothing to train on.
  EXPECT_TRUE(
      truncate_document(doc({1, 2, 3, 4}, {0, 0, 0, 1}), 3, Truncation::kTruncateRight, &why)
          .empty());
  EXPECT_EQ(why, "no_trained_tokens");
  auto kept =
      truncate_document(doc({1, 2, 3, 4}, {0, 0, 0, 1}), 3, Truncation::kTruncateLeft, &why);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].mask, (std::vector<uint8_t>{0, 0, 1}));
}

// Packs documents of the given lengths (token = 100 * doc + position) and returns the shard set.
std::shared_ptr<const ShardSet> pack(const std::string& dir, const std::vector<int>& lengths,
                                     int64_t seq_len, bool packing,
                                     std::vector<std::vector<uint8_t>> masks = {}) {
  ShardWriter w(dir, 1 << 20);
  SequencePacker p(seq_len, packing, w);  // window 64
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int32_t> t;
    for (int i = 0; i < lengths[d]; ++i) t.push_back(static_cast<int32_t>(100 * (d + 1) + i));
    p.add(doc(t, masks.empty() ? std::vector<uint8_t>{} : masks[d]));
  }
  p.finish();
  w.finish({{"config", {{"seq_len", seq_len}}}});
  return ShardSet::open(dir);
}

TEST(Packing, FirstFitWindow) {
  test::TempDir tmp;
  // 3 + 4 = 7 (open); 2 opens a second; 6 fills it to 8 (written first); 2 opens a third.
  auto set = pack(tmp.path().string(), {3, 4, 2, 6, 2}, 8, true);
  ASSERT_EQ(set->n_sequences(), 3);
  auto first_tokens = [&](int64_t i) {
    SequenceView v = set->sequence(i);
    std::vector<int32_t> starts;
    for (int64_t d = 0; d < v.n_docs; ++d)
      starts.push_back(static_cast<int32_t>(v.tokens[v.doc_offsets[d] - v.first_token]));
    return starts;
  };
  EXPECT_EQ(first_tokens(0), (std::vector<int32_t>{300, 400}));
  EXPECT_EQ(first_tokens(1), (std::vector<int32_t>{100, 200}));
  EXPECT_EQ(first_tokens(2), (std::vector<int32_t>{500}));
  EXPECT_EQ(set->sequence(1).n_tokens, 7);
  test::TempDir tmp2;
  EXPECT_EQ(pack(tmp2.path().string(), {3, 4, 2}, 8, false)->n_sequences(), 3);
  // window 1 = next-fit: 3+4 | 2+6 | 2, in input order.
  test::TempDir tmp3;
  {
    ShardWriter w(tmp3.path().string(), 1 << 20);
    SequencePacker p(8, true, w, 1);
    for (int len : {3, 4, 2, 6, 2}) p.add(doc(std::vector<int32_t>(static_cast<size_t>(len), 7)));
    p.finish();
    w.finish({{"config", {{"seq_len", 8}}}});
  }
  auto nf = ShardSet::open(tmp3.path().string());
  ASSERT_EQ(nf->n_sequences(), 3);
  EXPECT_EQ(nf->sequence(0).n_tokens, 7);
  EXPECT_EQ(nf->sequence(1).n_tokens, 8);
  EXPECT_EQ(nf->sequence(2).n_tokens, 2);
}

TEST(Packing, SeqRowsResetPositionsAtDocuments) {
  test::TempDir tmp;
  pack(tmp.path().string(), {3, 4}, 8, true);
  DatasetConfig c;
  c.path = tmp.path().string();
  c.batch_size = 1;
  c.shuffle = false;
  auto ds = make_datasets(c).train;
  ASSERT_EQ(ds->seq_len(), 8);
  TrainBatch b = ds->next_batch();
  EXPECT_EQ(b.ids.to_vector<int32_t>(),
            (std::vector<int32_t>{100, 101, 102, 200, 201, 202, 203, 0}));
  EXPECT_EQ(b.positions.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 3, 0}));
  EXPECT_EQ(b.doc_ids.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, -1}));
  const int32_t X = kIgnoreIndex;
  EXPECT_EQ(b.targets.to_vector<int32_t>(),
            (std::vector<int32_t>{101, 102, X, 201, 202, 203, X, X}));
  EXPECT_EQ(b.n_target_tokens, 5);
}

TEST(Packing, SftTargetsOnlyTrainedTokens) {
  test::TempDir tmp;
  pack(tmp.path().string(), {4, 3}, 8, true, {{0, 0, 1, 1}, {0, 1, 1}});
  DatasetConfig c;
  c.kind = "sft";
  c.path = tmp.path().string();
  c.batch_size = 1;
  c.shuffle = false;
  auto ds = make_datasets(c).train;
  TrainBatch b = ds->next_batch();
  const int32_t X = kIgnoreIndex;
  // token t predicts t+1 only when t+1 is trained and in the same document.
  EXPECT_EQ(b.targets.to_vector<int32_t>(), (std::vector<int32_t>{X, 102, 103, X, 201, 202, X, X}));
  EXPECT_EQ(b.n_target_tokens, 4);
  // The same shards as `seq`: every real next token.
  c.kind = "seq";
  TrainBatch s = make_datasets(c).train->next_batch();
  EXPECT_EQ(s.targets.to_vector<int32_t>(),
            (std::vector<int32_t>{101, 102, 103, X, 201, 202, X, X}));
}

TEST(Packing, LongerRowsPadAndShorterAreRejected) {
  test::TempDir tmp;
  pack(tmp.path().string(), {5}, 8, true);
  DatasetConfig c;
  c.path = tmp.path().string();
  c.batch_size = 2;  // one real row + one padding row
  c.seq_len = 10;
  auto ds = make_datasets(c).train;
  TrainBatch b = ds->next_batch();
  EXPECT_EQ(b.ids.shape(), (Shape{2, 10}));
  EXPECT_EQ(b.n_target_tokens, 4);
  auto t = b.targets.to_vector<int32_t>();
  for (int i = 10; i < 20; ++i) EXPECT_EQ(t[static_cast<size_t>(i)], kIgnoreIndex);
  c.seq_len = 4;
  EXPECT_THROW(make_datasets(c), InvalidArgument);
  c.seq_len = 0;
  c.drop_last = true;  // one sequence < one batch of 2
  EXPECT_THROW(make_datasets(c), InvalidArgument);
}

}  // namespace
}  // namespace vela
