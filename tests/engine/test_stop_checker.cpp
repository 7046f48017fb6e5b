// StopChecker / StopCondition tests: stop strings split over increments, earliest completion wins,
// held-back partials released, multi-byte UTF-8, pass-through without stops, flush, and the
// token-level rules (EOS, ignore_eos, stop_token_ids, max_tokens).
#include <gtest/gtest.h>

#include "engine/stop_checker.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace vela {
namespace {

// Feeds every increment, returns the concatenated emitted text (plus the flush when not stopped).
std::string run(StopChecker& c, const std::vector<std::string>& increments, bool flush = true) {
  std::string out;
  for (const std::string& s : increments) out += c.push(s);
  if (flush) out += c.flush();
  return out;
}

// Splits `text` into single bytes: the finest stream a checker can see.
std::vector<std::string> bytes_of(const std::string& text) {
  std::vector<std::string> out;
  for (char ch : text) out.emplace_back(1, ch);
  return out;
}

TEST(StopChecker, StopStringSplitAcrossTwoIncrements) {
  StopChecker c({"###"});
  EXPECT_EQ(c.push("abc#"), "abc");
  EXPECT_FALSE(c.stopped());
  EXPECT_EQ(c.n_pending(), 1u);
  EXPECT_EQ(c.push("##def"), "");
  EXPECT_TRUE(c.stopped());
  EXPECT_EQ(c.matched(), "###");
  EXPECT_EQ(c.push("more"), "");
  EXPECT_EQ(c.flush(), "");
}

TEST(StopChecker, StopStringSplitAcrossThreeIncrements) {
  StopChecker c({"<|end|>"});
  EXPECT_EQ(c.push("Hello <|"), "Hello ");
  EXPECT_EQ(c.push("en"), "");
  EXPECT_FALSE(c.stopped());
  EXPECT_EQ(c.push("d|> trailing"), "");
  EXPECT_TRUE(c.stopped());
  EXPECT_EQ(c.matched(), "<|end|>");
}

TEST(StopChecker, TextBeforeTheStopInTheSameIncrementIsEmitted) {
  StopChecker c({"STOP"});
  EXPECT_EQ(c.push("one two STOP three"), "one two ");
  EXPECT_TRUE(c.stopped());
}

TEST(StopChecker, EarliestCompletingStopStringWins) {
  {
    StopChecker c({"world", "lo w"});
    EXPECT_EQ(c.push("hello world"), "hel");
    EXPECT_EQ(c.matched(), "lo w");
  }
  {
    // "bc" completes before "abcd" does, even though "abcd" starts first; a byte-by-byte stream
    // gives the same answer as one increment.
    StopChecker whole({"abcd", "bc"});
    EXPECT_EQ(whole.push("xabcd"), "xa");
    EXPECT_EQ(whole.matched(), "bc");
    StopChecker bytes({"abcd", "bc"});
    EXPECT_EQ(run(bytes, bytes_of("xabcd")), "xa");
    EXPECT_EQ(bytes.matched(), "bc");
  }
  {
    // Same end: the one that starts first (emits less).
    StopChecker c({"c", "abc"});
    EXPECT_EQ(c.push("xxabc"), "xx");
    EXPECT_EQ(c.matched(), "abc");
  }
  {
    // List order does not matter.
    StopChecker c({"zz", "y"});
    EXPECT_EQ(c.push("ab y zz"), "ab ");
    EXPECT_EQ(c.matched(), "y");
  }
}

TEST(StopChecker, HeldBackPartialIsReleasedWhenItDoesNotMatch) {
  StopChecker c({"stop"});
  EXPECT_EQ(c.push("a st"), "a ");
  EXPECT_EQ(c.n_pending(), 2u);
  EXPECT_EQ(c.push("ar"), "star");
  EXPECT_FALSE(c.stopped());
  // Overlapping prefixes: "aab" inside "aaab" is still found.
  StopChecker o({"aab"});
  EXPECT_EQ(o.push("xaa"), "x");
  EXPECT_EQ(o.push("aab!"), "aa");  // "xaaaab!" -> "xaa"
  EXPECT_EQ(o.matched(), "aab");
  // The held part shrinks to the longest suffix that can still match.
  StopChecker s({"abab"});
  EXPECT_EQ(s.push("aba"), "");
  EXPECT_EQ(s.push("a"), "aba");  // "abaa": only the last "a" can still start "abab"
  EXPECT_EQ(s.flush(), "a");
}

TEST(StopChecker, MultiByteUtf8) {
  StopChecker c({"。"});
  EXPECT_EQ(c.push("你好"), "你好");
  EXPECT_EQ(c.push("。再见"), "");
  EXPECT_TRUE(c.stopped());

  StopChecker two({"好。"});
  EXPECT_EQ(two.push("你好"), "你");
  EXPECT_EQ(two.push("吗"), "好吗");
  EXPECT_EQ(two.push("好"), "");
  EXPECT_EQ(two.push("。"), "");
  EXPECT_EQ(two.matched(), "好。");

  // Byte-split input: an incomplete trailing character is never emitted half-way.
  StopChecker none({});
  const std::string ni = "你";  // E4 BD A0
  EXPECT_EQ(none.push(ni.substr(0, 2)), "");
  EXPECT_EQ(none.push(ni.substr(2) + "x"), "你x");
  StopChecker emoji({"🙂!"});
  EXPECT_EQ(run(emoji, bytes_of("ok 🙂🙂!")), "ok 🙂");
  EXPECT_EQ(emoji.matched(), "🙂!");
}

TEST(StopChecker, EmptyStopListPassesThrough) {
  StopChecker c({});
  EXPECT_EQ(c.push("abc"), "abc");
  EXPECT_EQ(c.push(""), "");
  EXPECT_EQ(c.push(" def"), " def");
  EXPECT_EQ(c.flush(), "");
  EXPECT_FALSE(c.stopped());
  StopChecker ignored({""});  // empty stop strings never match
  EXPECT_EQ(ignored.push("xyz"), "xyz");
}

TEST(StopChecker, FlushReleasesHeldBackText) {
  StopChecker c({"END"});
  EXPECT_EQ(c.push("the E"), "the ");
  EXPECT_EQ(c.push("N"), "");
  EXPECT_EQ(c.flush(), "EN");
  EXPECT_EQ(c.flush(), "");
  EXPECT_FALSE(c.stopped());
}

TEST(StopCondition, EosStopsAndReleasesHeldText) {
  SamplingParams p;
  p.stop = {"END"};
  StopCondition c(p, {2, 3});
  StopDecision d = c.step(10, 1, "hi E");
  EXPECT_EQ(d.text, "hi ");
  EXPECT_FALSE(d.finish.has_value());
  d = c.step(3, 2, "</s>");  // second EOS id: its text is not emitted
  ASSERT_TRUE(d.finish.has_value());
  EXPECT_EQ(*d.finish, FinishReason::kStop);
  EXPECT_EQ(d.text, "E");
  EXPECT_TRUE(d.stop_reason.empty());
  EXPECT_TRUE(c.finished());
  EXPECT_FALSE(c.step(11, 3, "x").finish.has_value());  // nothing after the end
}

TEST(StopCondition, IgnoreEosButNotStopTokenIds) {
  SamplingParams p;
  p.ignore_eos = true;
  p.stop_token_ids = {7};
  p.max_tokens = 100;
  StopCondition c(p, {2});
  StopDecision d = c.step(2, 1, "<eos>");
  EXPECT_FALSE(d.finish.has_value());
  EXPECT_EQ(d.text, "<eos>");
  d = c.step(7, 2, "<tool>");
  ASSERT_TRUE(d.finish.has_value());
  EXPECT_EQ(*d.finish, FinishReason::kStop);
  EXPECT_EQ(d.text, "");
}

TEST(StopCondition, StopStringAndMaxTokens) {
  SamplingParams p;
  p.stop = {"\n\n"};
  p.max_tokens = 3;
  StopCondition s(p, {0});
  EXPECT_EQ(s.step(5, 1, "a\n").text, "a");
  StopDecision d = s.step(6, 2, "\nb");
  EXPECT_EQ(*d.finish, FinishReason::kStop);
  EXPECT_EQ(d.stop_reason, "\n\n");
  EXPECT_EQ(d.text, "");

  StopCondition len(p, {0});
  EXPECT_EQ(len.step(5, 1, "x").text, "x");
  EXPECT_EQ(len.step(5, 2, "y\n").text, "y");
  d = len.step(5, 3, "z\n");
  ASSERT_TRUE(d.finish.has_value());
  EXPECT_EQ(*d.finish, FinishReason::kLength);
  EXPECT_EQ(d.text, "\nz\n");  // the last token's text plus the released "\n"

  // A stop string completing on the last allowed token is a stop, not a length finish.
  StopCondition both(p, {0});
  both.step(5, 1, "q");
  both.step(5, 2, "\n");
  EXPECT_EQ(*both.step(5, 3, "\n").finish, FinishReason::kStop);

  StopCondition cancelled(p, {0});
  cancelled.step(5, 1, "w\n");
  EXPECT_EQ(cancelled.finish(), "\n");
  EXPECT_TRUE(cancelled.finished());
  EXPECT_EQ(cancelled.finish(), "");
}

// A byte-level BPE tokenizer with no merges: one token per byte, so every multi-byte character and
// every stop string is split across tokens.
Tokenizer byte_tokenizer() {
  json vocab = json::object();
  int n_unprintable = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    uint32_t cp =
        printable ? static_cast<uint32_t>(b) : 256u + static_cast<uint32_t>(n_unprintable++);
    std::string sym;
    if (cp < 0x80) {
      sym += static_cast<char>(cp);
    } else {
      sym += static_cast<char>(0xC0 | (cp >> 6));
      sym += static_cast<char>(0x80 | (cp & 0x3F));
    }
    vocab[sym] = b;
  }
  json j = {
      {"version", "1.0"},
      {"added_tokens", json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
  return Tokenizer::from_json(j, "byte tokenizer");
}

TEST(StopCondition, StopStringOverStreamingDecoderTokens) {
  Tokenizer tok = byte_tokenizer();
  const std::string text = "你好 <|end|> 再见";
  std::vector<int32_t> ids = tok.encode(text);
  ASSERT_EQ(ids.size(), text.size());  // one token per byte
  SamplingParams p;
  p.stop = {"<|end|>", "再"};
  p.max_tokens = 1000;
  StopCondition stop(p, {-1});
  StreamingDecoder dec(tok);
  std::string out;
  int32_t n_generated = 0;
  std::optional<FinishReason> finish;
  for (int32_t id : ids) {
    StopDecision d = stop.step(id, ++n_generated, dec.push(id));
    // Never half a character on the way out.
    ASSERT_TRUE(d.text.empty() || (static_cast<unsigned char>(d.text[0]) & 0xC0) != 0x80);
    out += d.text;
    if (d.finish) {
      finish = d.finish;
      EXPECT_EQ(d.stop_reason, "<|end|>");
      break;
    }
  }
  ASSERT_TRUE(finish.has_value());
  EXPECT_EQ(*finish, FinishReason::kStop);
  EXPECT_EQ(out, "你好 ");
  EXPECT_EQ(n_generated, 14);  // "你好" (6 bytes), " ", then "<|end|>" ends on token 14
}

}  // namespace
}  // namespace vela
