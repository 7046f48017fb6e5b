// SamplingParams tests: OpenAI-request JSON parsing (every key, string-or-list stop, completions-
// style integer logprobs, nulls, unknown keys) and the validation message for each bad field.
#include <gtest/gtest.h>

#include <limits>

#include "core/error.h"
#include "core/test_util.h"
#include "engine/sampling_params.h"

namespace vela {
namespace {

SamplingParams parse(const std::string& text) {
  return SamplingParams::from_json(json::parse(text));
}

TEST(SamplingParams, DefaultsAreValid) {
  SamplingParams p;
  EXPECT_NO_THROW(p.validate());
  EXPECT_FALSE(p.is_greedy());
  EXPECT_FALSE(p.has_penalties());
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.n, 1);
}

TEST(SamplingParams, FromJsonReadsEveryKey) {
  SamplingParams p = parse(R"({
    "model": "ignored", "messages": [], "temperature": 0.7, "top_p": 0.9, "top_k": 40,
    "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": -0.25,
    "repetition_penalty": 1.1, "logit_bias": {"50256": -100, "7": 2.5}, "seed": 1234,
    "max_tokens": 64, "n": 3, "stop": ["\n\n", "END"], "stop_token_ids": [2, 13],
    "ignore_eos": true, "logprobs": true, "top_logprobs": 5})");
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.25f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  ASSERT_EQ(p.logit_bias.size(), 2u);
  EXPECT_EQ(p.logit_bias[0], (std::pair<int32_t, float>{50256, -100.0f}));
  EXPECT_EQ(p.logit_bias[1], (std::pair<int32_t, float>{7, 2.5f}));
  ASSERT_TRUE(p.seed.has_value());
  EXPECT_EQ(*p.seed, 1234u);
  EXPECT_EQ(p.max_tokens, 64);
  EXPECT_EQ(p.n, 3);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{2, 13}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_TRUE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 5);
  EXPECT_TRUE(p.has_penalties());
  // to_json round-trips.
  SamplingParams q = SamplingParams::from_json(p.to_json());
  EXPECT_EQ(q.to_json(), p.to_json());
}

TEST(SamplingParams, FromJsonForms) {
  SamplingParams one = parse(R"({"stop": "###"})");
  EXPECT_EQ(one.stop, (std::vector<std::string>{"###"}));
  // Completions-style "logprobs": k means logprobs + top k.
  SamplingParams k = parse(R"({"logprobs": 3})");
  EXPECT_TRUE(k.logprobs);
  EXPECT_EQ(k.top_logprobs, 3);
  SamplingParams zero = parse(R"({"logprobs": 0})");
  EXPECT_TRUE(zero.logprobs);
  EXPECT_EQ(zero.top_logprobs, 0);
  // Nulls are "unset" (OpenAI clients send them); max_completion_tokens is the chat alias.
  SamplingParams nulls =
      parse(R"({"temperature": null, "stop": null, "seed": null, "max_completion_tokens": 5})");
  EXPECT_FLOAT_EQ(nulls.temperature, 1.0f);
  EXPECT_TRUE(nulls.stop.empty());
  EXPECT_FALSE(nulls.seed.has_value());
  EXPECT_EQ(nulls.max_tokens, 5);
  SamplingParams greedy = parse(R"({"temperature": 0, "top_k": -1, "seed": -1})");
  EXPECT_TRUE(greedy.is_greedy());
  EXPECT_EQ(*greedy.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_NO_THROW(parse("{}"));
  // logprobs_mode (extension): raw by default (OpenAI's meaning), "tempered" for RL.
  EXPECT_EQ(parse("{}").logprobs_mode, LogprobsMode::kRaw);
  SamplingParams tempered = parse(R"({"logprobs": true, "logprobs_mode": "tempered"})");
  EXPECT_EQ(tempered.logprobs_mode, LogprobsMode::kTempered);
  EXPECT_EQ(SamplingParams::from_json(tempered.to_json()).logprobs_mode, LogprobsMode::kTempered);
  EXPECT_THROW_WITH(parse(R"({"logprobs_mode": "processed"})"), InvalidArgument, "logprobs_mode",
                    "processed");
}

TEST(SamplingParams, ValidateNamesTheFieldAndRange) {
  EXPECT_THROW_WITH(parse(R"({"temperature": -0.5})"), InvalidArgument, "temperature", ">= 0",
                    "-0.5");
  EXPECT_THROW_WITH(parse(R"({"top_p": 0})"), InvalidArgument, "top_p", "(0, 1]");
  EXPECT_THROW_WITH(parse(R"({"top_p": 1.5})"), InvalidArgument, "top_p", "(0, 1]", "1.5");
  EXPECT_THROW_WITH(parse(R"({"top_k": -2})"), InvalidArgument, "top_k", "-2");
  EXPECT_THROW_WITH(parse(R"({"min_p": 1.5})"), InvalidArgument, "min_p", "[0, 1]");
  EXPECT_THROW_WITH(parse(R"({"presence_penalty": 3})"), InvalidArgument, "presence_penalty",
                    "[-2, 2]");
  EXPECT_THROW_WITH(parse(R"({"frequency_penalty": -2.5})"), InvalidArgument, "frequency_penalty",
                    "[-2, 2]");
  EXPECT_THROW_WITH(parse(R"({"repetition_penalty": 0})"), InvalidArgument, "repetition_penalty",
                    "> 0");
  EXPECT_THROW_WITH(parse(R"({"logprobs": true, "top_logprobs": 21})"), InvalidArgument,
                    "top_logprobs", "[0, 20]", "21");
  EXPECT_THROW_WITH(parse(R"({"top_logprobs": 2})"), InvalidArgument, "top_logprobs",
                    "requires logprobs");
  EXPECT_THROW_WITH(parse(R"({"logprobs": 25})"), InvalidArgument, "logprobs", "[0, 20]");
  EXPECT_THROW_WITH(parse(R"({"n": 0})"), InvalidArgument, "n must be >= 1", "0");
  EXPECT_THROW_WITH(parse(R"({"max_tokens": -1})"), InvalidArgument, "max_tokens", ">= 0");
  EXPECT_THROW_WITH(parse(R"({"logit_bias": {"abc": 1}})"), InvalidArgument, "logit_bias",
                    "token ids", "\"abc\"");
  EXPECT_THROW_WITH(parse(R"({"logit_bias": {"12x": 1}})"), InvalidArgument, "logit_bias", "12x");
  EXPECT_THROW_WITH(parse(R"({"logit_bias": {"-3": 1}})"), InvalidArgument, "logit_bias", "-3");
  EXPECT_THROW_WITH(parse(R"({"logit_bias": {"3": "high"}})"), InvalidArgument, "logit_bias",
                    "number");
  EXPECT_THROW_WITH(parse(R"({"logit_bias": [1, 2]})"), InvalidArgument, "logit_bias", "object");
  EXPECT_THROW_WITH(parse(R"({"stop": ["ok", ""]})"), InvalidArgument, "stop", "non-empty");
  EXPECT_THROW_WITH(parse(R"({"stop": [1]})"), InvalidArgument, "stop", "string");
  EXPECT_THROW_WITH(parse(R"({"stop_token_ids": [-1]})"), InvalidArgument, "stop_token_ids");
  // Wrong JSON types name the key too.
  EXPECT_THROW_WITH(parse(R"({"temperature": "hot"})"), InvalidArgument, "temperature", "number");
  EXPECT_THROW_WITH(parse(R"({"max_tokens": 1.5})"), InvalidArgument, "max_tokens", "integer");
  EXPECT_THROW_WITH(parse(R"({"n": 3000000000})"), InvalidArgument, "n", "too large");
  EXPECT_THROW_WITH(parse(R"({"ignore_eos": 1})"), InvalidArgument, "ignore_eos", "true or false");
  EXPECT_THROW_WITH(parse(R"({"seed": "x"})"), InvalidArgument, "seed", "integer");
  EXPECT_THROW_WITH(parse("[1]"), InvalidArgument, "object");

  // validate() directly: -inf bias bans (allowed), NaN / +inf are not.
  SamplingParams p;
  p.logit_bias = {{3, -std::numeric_limits<float>::infinity()}};
  EXPECT_NO_THROW(p.validate());
  p.logit_bias = {{3, std::numeric_limits<float>::infinity()}};
  EXPECT_THROW_WITH(p.validate(), InvalidArgument, "logit_bias", "-inf");
  p.logit_bias = {{3, std::numeric_limits<float>::quiet_NaN()}};
  EXPECT_THROW_WITH(p.validate(), InvalidArgument, "logit_bias");
  p = SamplingParams();
  p.temperature = std::numeric_limits<float>::infinity();
  EXPECT_THROW_WITH(p.validate(), InvalidArgument, "temperature");
}

TEST(SamplingParams, ValidateTokenIdsAgainstTheVocabulary) {
  SamplingParams p;
  p.logit_bias = {{99, 1.0f}};
  p.stop_token_ids = {5};
  EXPECT_NO_THROW(p.validate_token_ids(100));
  EXPECT_THROW_WITH(p.validate_token_ids(99), InvalidArgument, "logit_bias", "99", "[0, 99)");
  p.logit_bias.clear();
  EXPECT_THROW_WITH(p.validate_token_ids(5), InvalidArgument, "stop_token_ids", "5");
}

}  // namespace
}  // namespace vela
