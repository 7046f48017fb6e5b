// The shared scorers (src/eval/scorers.h): SQuAD normalisation, exact match, number and GSM8K
// answer extraction, regex groups, ROUGE-L against hand-computed LCS values, JSON validity.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "eval/scorers.h"

namespace vela::scoring {
namespace {

TEST(Scorers, NormalizeAnswerFollowsSquad) {
  EXPECT_EQ(normalize_answer("The  Cat's hat!"), "cats hat");
  EXPECT_EQ(normalize_answer("  an Apple, a pear\tand THE end. "), "apple pear and end");
  EXPECT_EQ(normalize_answer("theater anatomy"), "theater anatomy");  // articles: whole words only
  EXPECT_EQ(normalize_answer("a-b"), "ab");  // punctuation removed before splitting
  EXPECT_EQ(normalize_answer(""), "");
  EXPECT_EQ(normalize_answer("The"), "");
  EXPECT_EQ(normalize_answer("Café Über"), "café Über");  // non-ASCII bytes pass through
}

TEST(Scorers, ExactMatch) {
  EXPECT_TRUE(exact_match("The Eiffel Tower.", "eiffel tower"));
  EXPECT_FALSE(exact_match("Eiffel Towers", "eiffel tower"));
  EXPECT_TRUE(exact_match("  Paris\n", "Paris", false));
  EXPECT_FALSE(exact_match("paris", "Paris", false));
  EXPECT_TRUE(exact_match("", "", true));
}

TEST(Scorers, CanonicalNumber) {
  EXPECT_EQ(canonical_number("-3"), "-3");
  EXPECT_EQ(canonical_number("1,234"), "1234");
  EXPECT_EQ(canonical_number("1,234,567.00"), "1234567");
  EXPECT_EQ(canonical_number("2.50"), "2.5");
  EXPECT_EQ(canonical_number("007"), "7");
  EXPECT_EQ(canonical_number("-0.0"), "0");
  EXPECT_EQ(canonical_number(".5"), "0.5");
  EXPECT_EQ(canonical_number("-.250"), "-0.25");
  EXPECT_EQ(canonical_number("0"), "0");
  EXPECT_FALSE(canonical_number("12a").has_value());
  EXPECT_FALSE(canonical_number("1,23").has_value());
  EXPECT_FALSE(canonical_number("").has_value());
  EXPECT_FALSE(canonical_number("-").has_value());
}

TEST(Scorers, ExtractLastNumber) {
  EXPECT_EQ(extract_last_number("She paid $1,234.50 for 3 items."), "3");
  EXPECT_EQ(extract_last_number("The answer is -3"), "-3");
  EXPECT_EQ(extract_last_number("x = -3."), "-3");
  EXPECT_EQ(extract_last_number("total: 1,234"), "1234");
  EXPECT_EQ(extract_last_number("costs 2.50."), "2.5");
  EXPECT_EQ(extract_last_number("5-3"), "3");  // '-' after a digit is not a sign
  EXPECT_EQ(extract_last_number("1, 2, 3"), "3");
  EXPECT_EQ(extract_last_number("1,2345"), "2345");  // not a thousands group
  EXPECT_EQ(extract_last_number("items: 12,345,678 units"), "12345678");
  EXPECT_EQ(extract_last_number("version 1.2.3"), "1.2");  // a point run is one number at most
  EXPECT_EQ(extract_last_number("about .75 of it"), "0.75");
  EXPECT_FALSE(extract_last_number("no digits here").has_value());
  EXPECT_FALSE(extract_last_number("").has_value());
}

TEST(Scorers, ExtractGsm8kAnswer) {
  EXPECT_EQ(extract_gsm8k_answer("Natalia sold 48/2 = <<48/2=24>>24 clips.\n48+24 = 72\n#### 72"),
            "72");
  EXPECT_EQ(extract_gsm8k_answer("#### 1,000 and then 5"), "1000");      // first number after ####
  EXPECT_EQ(extract_gsm8k_answer("#### 3\nwrong\n#### -4.0"), "-4");     // the last marker counts
  EXPECT_EQ(extract_gsm8k_answer("so the answer is 18 dollars"), "18");  // no marker: last number
  EXPECT_EQ(extract_gsm8k_answer("12 then ####"), "12");  // marker without a number: fall back
  EXPECT_FALSE(extract_gsm8k_answer("#### none").has_value());
}

TEST(Scorers, ExtractRegex) {
  EXPECT_EQ(extract_regex("The answer is (B). Or (C).", R"(\(([A-D])\))"), "B");  // first match
  EXPECT_EQ(extract_regex("The answer is (B).", R"(\(([A-D])\))", 0), "(B)");
  EXPECT_EQ(extract_regex("#### -12", R"(#### (\-?[0-9\.\,]+))"), "-12");
  EXPECT_FALSE(extract_regex("nothing", R"(\(([A-D])\))").has_value());
  // An optional group that did not take part in the match.
  EXPECT_FALSE(extract_regex("ab", "a(x)?b", 1).has_value());
  // Invalid UTF-8 in the text (a generation cut mid-character) is tolerated.
  EXPECT_EQ(extract_regex(std::string("ans: 7 \xE2\x82"), R"(ans: (\d+))"), "7");
  EXPECT_THROW(extract_regex("x", "(unclosed"), InvalidArgument);
  EXPECT_THROW(extract_regex("x", "(a)", 2), InvalidArgument);
  EXPECT_THROW(extract_regex("x", "(a)", -1), InvalidArgument);
  // The cache must not confuse two patterns.
  for (int i = 0; i < 40; ++i) {
    std::string key = "n";
    key += std::to_string(i);
    std::string digit = std::to_string(i % 10);
    std::string text = key;
    text += "=";
    text += digit;
    std::string pattern = key;
    pattern += "=(\\d)";
    EXPECT_EQ(extract_regex(text, pattern), digit);
  }
}

TEST(Scorers, RougeL) {
  // pred "the cat sat on the mat" (6), ref "the cat is on the mat" (6): LCS "the cat on the mat" =
  // 5 P = R = 5/6 -> F1 = 5/6.
  EXPECT_NEAR(rouge_l_f1("The cat sat on the mat.", "the cat is on the mat"), 5.0 / 6.0, 1e-12);
  // pred 2 tokens ("police killed"), ref 4, LCS 1: P = 1/2, R = 1/4 -> F1 = 1/3.
  EXPECT_NEAR(rouge_l_f1("police killed", "police kill the gunman"), 1.0 / 3.0, 1e-12);
  // pred 2 tokens, ref 4 tokens, LCS 2: P = 1, R = 0.5 -> F1 = 2/3.
  EXPECT_NEAR(rouge_l_f1("police gunman", "police kill the gunman"), 2.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(rouge_l_f1("a b c", "a b c"), 1.0);
  EXPECT_DOUBLE_EQ(rouge_l_f1("x y", "a b"), 0.0);
  EXPECT_DOUBLE_EQ(rouge_l_f1("", "a"), 0.0);
  EXPECT_DOUBLE_EQ(rouge_l_f1("", ""), 0.0);
  EXPECT_DOUBLE_EQ(rouge_l_f1("...", "a"), 0.0);
  // LCS is order-sensitive: "b a" vs "a b" share one token in order. P = R = 1/2.
  EXPECT_DOUBLE_EQ(rouge_l_f1("b a", "a b"), 0.5);
}

TEST(Scorers, IsValidJson) {
  EXPECT_TRUE(is_valid_json(R"({"a": [1, 2, {"b": null}]})"));
  EXPECT_TRUE(is_valid_json("  42 \n"));
  EXPECT_TRUE(is_valid_json(R"("str")"));
  EXPECT_FALSE(is_valid_json(R"({"a": 1,})"));
  EXPECT_FALSE(is_valid_json(R"({"a": 1} {"b": 2})"));
  EXPECT_FALSE(is_valid_json(""));
  EXPECT_FALSE(is_valid_json("{'a': 1}"));
}

}  // namespace
}  // namespace vela::scoring
