// Normalizers: Unicode forms, Lowercase, Replace, Strip, Prepend, Sequence, errors.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tok_test_util.h"
#include "tokenizer/normalizer.h"

namespace vela {
namespace {

using test::tjson;

std::string norm(const tjson& j, const std::string& s) {
  auto n = Normalizer::from_json(j);
  NormalizedText t{s, true};
  n->normalize(t);
  return t.text;
}

TEST(Normalizer, UnicodeForms) {
  EXPECT_EQ(norm({{"type", "NFC"}}, "e\xCC\x81"), "\xC3\xA9");  // e + acute -> é
  EXPECT_EQ(norm({{"type", "NFD"}}, "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(norm({{"type", "NFKC"}}, "\xEF\xAC\x81"), "fi");        // ﬁ ligature
  EXPECT_EQ(norm({{"type", "NFKD"}}, "\xE2\x84\xA6"), "\xCE\xA9");  // Ohm -> Omega
  EXPECT_EQ(norm({{"type", "NFC"}}, "plain ascii"), "plain ascii");
  // Hugging Face's tables are older than utf8proc's: these stay as they are there, and in vela.
  EXPECT_EQ(norm({{"type", "NFKC"}},
                 "a\xE3\x8B\xBF"
                 "b"),
            "a\xE3\x8B\xBF"
            "b");  // U+32FF (Reiwa)
  EXPECT_EQ(norm({{"type", "NFKD"}}, "\xEF\xAC\x81\xEA\x9F\xB2"), "fi\xEA\x9F\xB2");  // ﬁ + U+A7F2
}

TEST(Normalizer, LowercaseIsRustToLowercase) {
  EXPECT_EQ(norm({{"type", "Lowercase"}}, "HeLLo \xC3\x84\xCE\xA3"),
            "hello \xC3\xA4\xCF\x83");                                // ÄΣ -> äσ
  EXPECT_EQ(norm({{"type", "Lowercase"}}, "\xC4\xB0"), "i\xCC\x87");  // İ -> i + combining dot
}

TEST(Normalizer, ReplaceStringAndRegex) {
  EXPECT_EQ(norm({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "_"}}, "a b  c"),
            "a_b__c");
  EXPECT_EQ(
      norm({{"type", "Replace"}, {"pattern", {{"String", "a.b"}}}, {"content", "X"}}, "a.b axb"),
      "X axb");
  EXPECT_EQ(
      norm({{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}, "a \t\n b"),
      "a b");
}

TEST(Normalizer, StripPrependSequence) {
  EXPECT_EQ(
      norm({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, " \t hi \xE3\x80\x80"),
      "hi");
  EXPECT_EQ(norm({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}, "  hi  "),
            "  hi");
  EXPECT_EQ(norm({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, "hi"), "\xE2\x96\x81hi");
  EXPECT_EQ(norm({{"type", "Prepend"}, {"prepend", "_"}}, ""), "");
  tjson seq = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "NFKC"}}, {{"type", "Lowercase"}}, {{"type", "Prepend"}, {"prepend", ">"}}}}};
  EXPECT_EQ(norm(seq, "\xEF\xAC\x81X"), ">fix");
}

TEST(Normalizer, UnknownTypeNamesIt) {
  try {
    Normalizer::from_json({{"type", "Precompiled"}});
    FAIL();
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("normalizer type 'Precompiled' is not supported"),
              std::string::npos);
  }
  EXPECT_THROW(Normalizer::from_json({{"type", "Replace"}, {"content", "x"}}), InvalidArgument);
  EXPECT_EQ(Normalizer::from_json(nullptr), nullptr);
}

}  // namespace
}  // namespace vela
