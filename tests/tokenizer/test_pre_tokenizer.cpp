// Pre-tokenizers: every Split behavior (and invert), ByteLevel, Digits, Whitespace,
// WhitespaceSplit, Metaspace, Sequence. Expected values are Hugging Face tokenizers' own.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tok_test_util.h"

namespace vela {
namespace {

using test::pieces_of;
using test::tjson;
using V = std::vector<std::string>;

tjson split(const tjson& pattern, const char* behavior, bool invert) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

TEST(PreTokenizer, SplitBehaviorsInverted) {
  tjson re = {{"Regex", "\\w+|[^\\w\\s]+"}};
  const std::string s = "How are you doing?";
  EXPECT_EQ(pieces_of(split(re, "Removed", true), s), (V{"How", "are", "you", "doing", "?"}));
  EXPECT_EQ(pieces_of(split(re, "Isolated", true), s),
            (V{"How", " ", "are", " ", "you", " ", "doing", "?"}));
  EXPECT_EQ(pieces_of(split(re, "MergedWithPrevious", true), s),
            (V{"How ", "are ", "you ", "doing", "?"}));
  EXPECT_EQ(pieces_of(split(re, "MergedWithNext", true), s),
            (V{"How", " are", " you", " doing", "?"}));
  EXPECT_EQ(pieces_of(split(re, "Contiguous", true), s),
            (V{"How", " ", "are", " ", "you", " ", "doing?"}));
}

TEST(PreTokenizer, SplitBehaviorsOnDelimiter) {
  tjson dash = {{"String", "-"}};
  const std::string s = "the-final--countdown";
  EXPECT_EQ(pieces_of(split(dash, "Removed", false), s), (V{"the", "final", "countdown"}));
  EXPECT_EQ(pieces_of(split(dash, "Isolated", false), s),
            (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pieces_of(split(dash, "MergedWithPrevious", false), s),
            (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pieces_of(split(dash, "MergedWithNext", false), s),
            (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pieces_of(split(dash, "Contiguous", false), s),
            (V{"the", "-", "final", "--", "countdown"}));
  // invert with a literal: keep "Hello"s, drop what is between.
  EXPECT_EQ(pieces_of(split({{"String", "Hello"}}, "Removed", true), "Hello Hello Hello"),
            (V{"Hello", "Hello", "Hello"}));
  // A literal is literal, whatever regex syntax it contains.
  EXPECT_EQ(pieces_of(split({{"String", "\\s[x]\\E."}}, "Removed", false), "a\\s[x]\\E.b"),
            (V{"a", "b"}));
}

TEST(PreTokenizer, SplitRegexFeaturesOfRealTokenizers) {
  // Qwen/Llama-3 style: case-insensitive contractions, \p{L}, lookahead for trailing spaces.
  tjson re = {{"Regex",
               "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}};
  EXPECT_EQ(pieces_of(split(re, "Isolated", false), "I'M here  12345 caf\xC3\xA9!\n\n  x"),
            (V{"I", "'M", " here", " ", " ", "123", "45", " caf\xC3\xA9", "!\n\n", " ", " x"}));
  // U+180E is not White_Space (PCRE2's \s would say it is).
  EXPECT_EQ(pieces_of(split({{"Regex", "\\s+"}}, "Removed", false),
                      "a\xE1\xA0\x8E"
                      "b c"),
            (V{"a\xE1\xA0\x8E"
               "b",
               "c"}));
}

TEST(PreTokenizer, ByteLevel) {
  tjson bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  EXPECT_EQ(pieces_of(bl, "Hello my friend, how?"), (V{"Hello", "\xC4\xA0my",
                                                       "\xC4\xA0"
                                                       "friend",
                                                       ",", "\xC4\xA0how", "?"}));
  EXPECT_EQ(pieces_of(bl, "Hello there\nHello"),
            (V{"Hello", "\xC4\xA0there", "\xC4\x8A", "Hello"}));
  EXPECT_EQ(pieces_of(bl, "i\xE2\xAD\xA2j"), (V{"i", "\xC3\xA2\xC5\x83\xC2\xA2", "j"}));  // i⭢j
  tjson prefix = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}};
  EXPECT_EQ(pieces_of(prefix, "Hi you"), (V{"\xC4\xA0Hi\xC4\xA0you"}));
  EXPECT_EQ(pieces_of(prefix, " Hi"), (V{"\xC4\xA0Hi"}));
}

TEST(PreTokenizer, DigitsWhitespaceAndSplit) {
  EXPECT_EQ(pieces_of({{"type", "Digits"}, {"individual_digits", true}}, "Call 123 please"),
            (V{"Call ", "1", "2", "3", " please"}));
  EXPECT_EQ(pieces_of({{"type", "Digits"}, {"individual_digits", false}}, "Call 123 please"),
            (V{"Call ", "123", " please"}));
  EXPECT_EQ(pieces_of({{"type", "Whitespace"}}, "Hey man!"), (V{"Hey", "man", "!"}));
  EXPECT_EQ(pieces_of({{"type", "Whitespace"}}, "\n"), V{});
  EXPECT_EQ(pieces_of({{"type", "WhitespaceSplit"}}, "Hey, man, Good?"),
            (V{"Hey,", "man,", "Good?"}));
}

TEST(PreTokenizer, Metaspace) {
  tjson ms = {{"type", "Metaspace"},
              {"replacement", "\xE2\x96\x81"},
              {"prepend_scheme", "always"},
              {"split", true}};
  EXPECT_EQ(pieces_of(ms, "Hey friend!"), (V{"\xE2\x96\x81Hey",
                                             "\xE2\x96\x81"
                                             "friend!"}));
  EXPECT_EQ(pieces_of(ms, "Hey   friend!"), (V{"\xE2\x96\x81Hey", "\xE2\x96\x81", "\xE2\x96\x81",
                                               "\xE2\x96\x81"
                                               "friend!"}));
  tjson first = {{"type", "Metaspace"},
                 {"replacement", "\xE2\x96\x81"},
                 {"prepend_scheme", "first"},
                 {"split", false}};
  auto p = PreTokenizer::from_json(first);
  auto out = p->pre_tokenize_all({NormalizedText{"Hey my", true}, NormalizedText{"how", false}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].text, "\xE2\x96\x81Hey\xE2\x96\x81my");
  EXPECT_EQ(out[1].text, "how");
}

TEST(PreTokenizer, SequenceAndErrors) {
  tjson seq = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}, {"individual_digits", true}}}}};
  EXPECT_EQ(pieces_of(seq, "ab12 c3"), (V{"ab", "1", "2", "c", "3"}));
  try {
    PreTokenizer::from_json({{"type", "UnicodeScripts"}});
    FAIL();
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer type 'UnicodeScripts' is not supported"),
              std::string::npos);
  }
  EXPECT_THROW(PreTokenizer::from_json(split({{"Regex", "(unclosed"}}, "Isolated", false)),
               InvalidArgument);
  EXPECT_THROW(PreTokenizer::from_json(split({{"Regex", "a"}}, "Sideways", false)),
               InvalidArgument);
}

}  // namespace
}  // namespace vela
