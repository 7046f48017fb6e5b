// Added tokens: special and normal tokens, longest match, lstrip / rstrip / single_word /
// normalized, and skip_special_tokens on decode. Expectations follow Hugging Face's own tests.
#include <gtest/gtest.h>

#include "tok_test_util.h"
#include "tokenizer/added_tokens.h"

namespace vela {
namespace {

using test::tjson;

struct Split {
  std::string text;
  int32_t id;
  bool operator==(const Split&) const = default;
};
std::ostream& operator<<(std::ostream& o, const Split& s) {
  return o << "(" << s.text << "," << s.id << ")";
}

std::vector<Split> split(const AddedTokens& a, const std::string& text, bool normalized) {
  std::vector<Segment> segs;
  a.split(text, normalized, segs);
  std::vector<Split> out;
  for (auto& s : segs) out.push_back({std::string(s.text), s.token_id});
  return out;
}

AddedTokens make(std::vector<AddedToken> t) {
  AddedTokens a;
  a.build(std::move(t), [](const std::string& s) {
    std::string l = s;
    for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l;
  });
  return a;
}

TEST(AddedTokens, LongestLeftmostMatch) {
  AddedTokens a = make({{0, "<|im", false, false, false, false, true},
                        {1, "<|im_start|>", false, false, false, false, true}});
  EXPECT_EQ(
      split(a, "x<|im_start|>y<|imz", false),
      (std::vector<Split>{{"x", -1}, {"<|im_start|>", 1}, {"y", -1}, {"<|im", 0}, {"z", -1}}));
}

TEST(AddedTokens, StripAndSingleWord) {
  // Lowercase-normalized matching: "my" (lstrip+rstrip), "name", "ony" (single word).
  AddedTokens a = make({{0, "my", false, true, true, true, false},
                        {1, "name", false, false, false, true, false},
                        {2, "ony", true, false, false, true, false},
                        {3, "[CLS]", false, false, false, false, true},
                        {4, "[SEP]", false, false, false, false, true}});
  std::vector<Split> raw = split(a, "[CLS] My name is Anthony [SEP]", false);
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_EQ(split(a, " my name is anthony ", true),
            (std::vector<Split>{{" my ", 0}, {"name", 1}, {" is anthony ", -1}}));
  AddedTokens m = make({{0, "<mask>", true, false, false, true, false}});
  EXPECT_EQ(split(m, "<mask> my name <mask> a<mask> <mask>ony <mask>", true),
            (std::vector<Split>{{"<mask>", 0},
                                {" my name ", -1},
                                {"<mask>", 0},
                                {" a<mask> <mask>ony ", -1},
                                {"<mask>", 0}}));
  AddedTokens ws = make({{0, "<mask>", true, true, true, true, false}});
  EXPECT_EQ(split(ws, "hi <mask> there\t<mask>\t<mask>\xE2\x80\x80", true),
            (std::vector<Split>{{"hi", -1},
                                {" <mask> ", 0},
                                {"there", -1},
                                {"\t<mask>\t", 0},
                                {"<mask>\xE2\x80\x80", 0}}));
}

TEST(AddedTokens, ThroughTheTokenizer) {
  tjson j = test::byte_level_tokenizer();
  j["added_tokens"] = {
      {{"id", 300}, {"content", "<|im_start|>"}, {"special", true}, {"normalized", false}},
      {{"id", 301}, {"content", "<think>"}, {"special", false}, {"normalized", false}},
      {{"id", 302},
       {"content", "<eot>"},
       {"special", true},
       {"normalized", false},
       {"lstrip", true}}};
  Tokenizer t = Tokenizer::from_json(j);
  auto ids = t.encode("<|im_start|>hi<think>  <eot>");
  EXPECT_EQ(ids, (std::vector<int32_t>{300, 'h', 'i', 301, 302}));  // spaces eaten by lstrip
  EXPECT_EQ(t.decode(ids), "<|im_start|>hi<think><eot>");
  EXPECT_EQ(t.decode(ids, true), "hi<think>");  // non-special <think> stays
  EXPECT_TRUE(t.is_special(300));
  EXPECT_FALSE(t.is_special(301));
  EXPECT_EQ(t.token_to_id("<think>"), 301);
  EXPECT_EQ(t.vocab_size(), 303);
}

}  // namespace
}  // namespace vela
