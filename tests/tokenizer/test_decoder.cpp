// Decoders: ByteLevel (lossy UTF-8), ByteFallback, Metaspace, Replace, Fuse, Strip, Sequence.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tok_test_util.h"
#include "tokenizer/decoder.h"

namespace vela {
namespace {

using test::tjson;
using V = std::vector<std::string>;

std::string dec(const tjson& j, V tokens) {
  auto d = Decoder::from_json(j);
  return run_decoder(d.get(), std::move(tokens));
}

TEST(Decoder, ByteLevel) {
  tjson bl = {{"type", "ByteLevel"}};
  EXPECT_EQ(dec(bl, {"Hello", "\xC4\xA0my",
                     "\xC4\xA0"
                     "friend",
                     ","}),
            "Hello my friend,");
  EXPECT_EQ(dec(bl, {"\xC3\xA4\xC2\xBD", "\xC5\x82"}), "\xE4\xBD\xA0");  // 你 split across tokens
  EXPECT_EQ(dec(bl, {"\xC3\xA4\xC2\xBD"}), "\xEF\xBF\xBD");              // incomplete -> U+FFFD
  EXPECT_EQ(dec(bl, {"<|im start|>"}), "<|im start|>");  // not byte-level: kept as is
}

TEST(Decoder, ByteFallbackAndFuse) {
  tjson seq = {{"type", "Sequence"},
               {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  EXPECT_EQ(dec(seq, {"a", "<0xE2>", "<0x82>", "<0xAC>", "b"}),
            "a\xE2\x82\xAC"
            "b");
  EXPECT_EQ(dec(seq, {"<0xE2>", "<0x82>", "x"}),
            "\xEF\xBF\xBD\xEF\xBF\xBDx");  // one U+FFFD per byte
  EXPECT_EQ(dec({{"type", "Fuse"}}, {"a", "b"}), "ab");
}

TEST(Decoder, MetaspaceReplaceStrip) {
  tjson ms = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}};
  EXPECT_EQ(dec(ms, {"\xE2\x96\x81Hey",
                     "\xE2\x96\x81"
                     "friend!"}),
            "Hey friend!");
  tjson never = {
      {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "never"}};
  EXPECT_EQ(dec(never, {"\xE2\x96\x81Hey",
                        "\xE2\x96\x81"
                        "friend!"}),
            " Hey friend!");
  // Llama-2 style: Replace ▁ -> space, ByteFallback, Fuse, Strip one leading space.
  tjson llama2 = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(dec(llama2, {"\xE2\x96\x81Hello",
                         "\xE2\x96\x81"
                         "world",
                         "<0x21>"}),
            "Hello world!");
  EXPECT_TRUE(Decoder::from_json(llama2)->edits_first_token());
  EXPECT_FALSE(Decoder::from_json({{"type", "ByteLevel"}})->edits_first_token());
}

TEST(Decoder, NoDecoderJoinsWithSpacesAndUnknownTypeNamesIt) {
  EXPECT_EQ(run_decoder(nullptr, {"a", "b"}), "a b");
  try {
    Decoder::from_json({{"type", "CTC"}});
    FAIL();
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("decoder type 'CTC'"), std::string::npos);
  }
}

}  // namespace
}  // namespace vela
