// BpeModel: merge order, both merge formats, unk (fused or not), byte_fallback, ignore_merges,
// continuing_subword_prefix, and errors for merges that name unknown tokens.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tok_test_util.h"
#include "tokenizer/bpe_model.h"

namespace vela {
namespace {

using test::tjson;
using Ids = std::vector<int32_t>;

Ids tok(const BpeModel& m, const std::string& w) {
  Ids out;
  m.tokenize(w, out);
  return out;
}

tjson model(tjson vocab, tjson merges, tjson extra = tjson::object()) {
  tjson m = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
  for (auto it = extra.begin(); it != extra.end(); ++it) m[it.key()] = it.value();
  return m;
}

TEST(BpeModel, LowestRankFirstAndBothMergeFormats) {
  tjson vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  // "b c" outranks "a b": abc -> a + bc, and no (a, bc) merge.
  BpeModel m1 = BpeModel::from_json(model(vocab, tjson::array({"b c", "a b"})));
  EXPECT_EQ(tok(m1, "abc"), (Ids{0, 4}));
  BpeModel m2 = BpeModel::from_json(
      model(vocab, tjson::array({tjson::array({"a", "b"}), tjson::array({"b", "c"}),
                                 tjson::array({"ab", "c"})})));
  EXPECT_EQ(tok(m2, "abc"), (Ids{5}));
  EXPECT_EQ(tok(m2, "abcabc"), (Ids{5, 5}));
  EXPECT_EQ(tok(m2, "cba"), (Ids{2, 1, 0}));
  // Ties go to the leftmost pair: "aaa" with "a a" -> "aa" + "a".
  BpeModel m3 = BpeModel::from_json(model({{"a", 0}, {"aa", 1}}, tjson::array({"a a"})));
  EXPECT_EQ(tok(m3, "aaa"), (Ids{1, 0}));
  EXPECT_EQ(tok(m3, "aaaa"), (Ids{1, 1}));
}

TEST(BpeModel, UnknownCharacters) {
  tjson vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}};
  BpeModel plain = BpeModel::from_json(model(vocab, tjson::array(), {{"unk_token", "<unk>"}}));
  EXPECT_EQ(tok(plain, "accb"), (Ids{1, 0, 0, 2}));
  BpeModel fused = BpeModel::from_json(
      model(vocab, tjson::array(), {{"unk_token", "<unk>"}, {"fuse_unk", true}}));
  EXPECT_EQ(tok(fused, "accb"), (Ids{1, 0, 2}));
  BpeModel none = BpeModel::from_json(model(vocab, tjson::array()));
  EXPECT_EQ(tok(none, "acb"), (Ids{1, 2}));  // no unk token: dropped, as in Hugging Face
}

TEST(BpeModel, ByteFallback) {
  tjson vocab = {{"<unk>", 0}, {"<0xE2>", 1}, {"<0x82>", 2}, {"<0xAC>", 3}, {"a", 4}};
  BpeModel m = BpeModel::from_json(
      model(vocab, tjson::array(), {{"unk_token", "<unk>"}, {"byte_fallback", true}}));
  EXPECT_EQ(tok(m, "a\xE2\x82\xAC"), (Ids{4, 1, 2, 3}));  // € has no token: its bytes
  EXPECT_EQ(tok(m, "\xC3\xA9"), (Ids{0}));                // é: bytes missing too -> unk
}

TEST(BpeModel, IgnoreMergesAndPrefix) {
  tjson vocab = {{"h", 0}, {"e", 1}, {"y", 2}, {"he", 3}, {"hey", 4}};
  // ignore_merges: a word that is itself a token is taken whole even without a merge path.
  BpeModel im = BpeModel::from_json(model(vocab, tjson::array({"h e"}), {{"ignore_merges", true}}));
  EXPECT_EQ(tok(im, "hey"), (Ids{4}));
  BpeModel no = BpeModel::from_json(model(vocab, tjson::array({"h e"})));
  EXPECT_EQ(tok(no, "hey"), (Ids{3, 2}));
  tjson wp = {{"a", 0}, {"##b", 1}, {"##c", 2}, {"ab", 3}, {"##bc", 4}};
  BpeModel pre = BpeModel::from_json(
      model(wp, tjson::array({"a ##b", "##b ##c"}), {{"continuing_subword_prefix", "##"}}));
  EXPECT_EQ(tok(pre, "ab"), (Ids{3}));
  EXPECT_EQ(tok(pre, "abc"), (Ids{3, 2}));
}

TEST(BpeModel, BadMergesAreErrors) {
  tjson vocab = {{"a", 0}, {"b", 1}};
  EXPECT_THROW(BpeModel::from_json(model(vocab, tjson::array({"a c"}))), InvalidArgument);
  EXPECT_THROW(BpeModel::from_json(model(vocab, tjson::array({"a b"}))),
               InvalidArgument);  // "ab" not in vocab
  EXPECT_THROW(BpeModel::from_json(model(vocab, tjson::array({"ab"}))), InvalidArgument);
  EXPECT_THROW(BpeModel::from_json(model(vocab, tjson::array({tjson::array({"a"})}))),
               InvalidArgument);
  EXPECT_THROW(BpeModel::from_json({{"type", "WordPiece"}, {"vocab", vocab}}), Unsupported);
}

}  // namespace
}  // namespace vela
