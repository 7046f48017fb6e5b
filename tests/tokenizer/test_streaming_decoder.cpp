// StreamingDecoder: never half a UTF-8 character; pushes + flush == decode(all ids), for emoji
// and CJK split across byte tokens, and for a Metaspace tokenizer whose decoder strips the first
// token's leading space.
#include <gtest/gtest.h>

#include "tok_test_util.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/unicode.h"

namespace vela {
namespace {

using test::tjson;

void check_stream(const Tokenizer& t, const std::vector<int32_t>& ids) {
  StreamingDecoder s(t);
  std::string all;
  for (int32_t id : ids) {
    std::string piece = s.push(id);
    EXPECT_EQ(unicode::find_invalid_utf8(piece), std::string::npos);
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "held-back bytes leaked as U+FFFD";
    all += piece;
  }
  all += s.flush();
  EXPECT_EQ(all, t.decode(ids));
  EXPECT_EQ(s.text(), all);
}

TEST(StreamingDecoder, EmojiAndCjkAcrossByteTokens) {
  Tokenizer t =
      Tokenizer::from_json(test::byte_level_tokenizer());  // no merges: one token per byte
  for (std::string s : {"\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "
                        "family",                                            // 👨‍👩‍👧
                        "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C",  // 你好世界
                        "a\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD b", "plain text", ""}) {
    auto ids = t.encode(s);
    check_stream(t, ids);
    StreamingDecoder d(t);
    std::string got;
    for (int32_t id : ids) got += d.push(id);
    got += d.flush();
    EXPECT_EQ(got, s);
  }
  // The first three bytes of 你 give nothing until the character completes.
  StreamingDecoder d(t);
  auto ids = t.encode("\xE4\xBD\xA0");
  EXPECT_EQ(d.push(ids[0]), "");
  EXPECT_EQ(d.push(ids[1]), "");
  EXPECT_EQ(d.push(ids[2]), "\xE4\xBD\xA0");
}

TEST(StreamingDecoder, IncompleteTailIsFlushedAsDecodeDoes) {
  Tokenizer t = Tokenizer::from_json(test::byte_level_tokenizer());
  auto ids = t.encode("ok\xE4\xBD\xA0");
  ids.pop_back();  // cut the character
  check_stream(t, ids);
}

TEST(StreamingDecoder, MetaspaceLeadingSpace) {
  tjson j = {
      {"version", "1.0"},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}},
      {"decoder",
       {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab",
         {{"\xE2\x96\x81Hey", 0},
          {"\xE2\x96\x81"
           "friend",
           1},
          {"!", 2},
          {"\xE2\x96\x81", 3}}},
        {"merges", tjson::array()},
        {"ignore_merges", true}}}};
  Tokenizer t = Tokenizer::from_json(j);
  EXPECT_TRUE(t.decoder_edits_first_token());
  std::vector<int32_t> ids = {0, 1, 3, 0, 2};
  check_stream(t, ids);
  StreamingDecoder d(t);
  EXPECT_EQ(d.push(0), "Hey");
  EXPECT_EQ(d.push(1), " friend");
}

}  // namespace
}  // namespace vela
