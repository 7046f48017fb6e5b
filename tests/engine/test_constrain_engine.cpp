// Constrained decoding through the Engine on the CPU: JSON Schema / regex / choice outputs of a
// random model at temperature 1 always match, with n > 1 siblings, logprobs, stop strings,
// preemption under KV pressure (check_integrity after), and bad schemas rejected at submit.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <set>

#include "constrain_test_util.h"
#include "core/error.h"
#include "engine/constrain/grammar_compiler.h"
#include "engine/spec/spec_config.h"

namespace vela {
namespace {

Request sampled(const Constraint& c, int n, int max_tokens, uint64_t seed) {
  Request r;
  r.prompt = {5, 6, 7};
  r.params.temperature = 1.0f;
  r.params.n = n;
  r.params.max_tokens = max_tokens;
  r.params.seed = seed;
  r.params.constraint = c;
  return r;
}

const char* kPersonSchema = R"({"type":"object","properties":{
    "name":{"type":"string","maxLength":12},
    "age":{"type":"integer","minimum":0,"maximum":120},
    "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3},
    "ok":{"type":"boolean"}},
  "required":["name","age"],"additionalProperties":false})";

void check_person(const std::string& text) {
  json j;
  ASSERT_NO_THROW(j = json::parse(text)) << text;
  ASSERT_TRUE(j.is_object()) << text;
  ASSERT_TRUE(j.contains("name") && j["name"].is_string()) << text;
  EXPECT_LE(j["name"].get<std::string>().size(), 12u * 4) << text;
  ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer()) << text;
  EXPECT_GE(j["age"].get<int64_t>(), 0);
  EXPECT_LE(j["age"].get<int64_t>(), 120);
  for (const auto& [k, v] : j.items())
    EXPECT_TRUE(k == "name" || k == "age" || k == "tags" || k == "ok") << k;
  if (j.contains("tags")) {
    ASSERT_TRUE(j["tags"].is_array());
    EXPECT_LE(j["tags"].size(), 3u);
  }
}

TEST(ConstrainEngine, JsonSchemaSiblingsWithLogprobsAllValid) {
  EngineConfig cfg;
  cfg.max_seqs = 16;
  auto engine = test::json_test_engine(cfg);
  Request r = sampled(Constraint::json_schema(json::parse(kPersonSchema)), 12, 1000, 3);
  r.params.logprobs = true;
  r.params.top_logprobs = 3;
  auto res = engine->generate({r});
  ASSERT_EQ(res[0].completions.size(), 12u);
  std::set<std::string> distinct;
  for (const Completion& c : res[0].completions) {
    EXPECT_EQ(c.finish_reason, FinishReason::kStop) << c.text;
    EXPECT_TRUE(c.error.empty()) << c.error;
    check_person(c.text);
    if (distinct.empty()) std::printf("[constrain] sample: %s\n", c.text.c_str());
    distinct.insert(c.text);
    ASSERT_EQ(c.logprobs.size(), c.tokens.size());
    for (const TokenLogprob& lp : c.logprobs) {
      EXPECT_TRUE(std::isfinite(lp.logprob)) << "a sampled token must be allowed by the mask";
      EXPECT_LE(lp.logprob, 0.0f);
      for (const auto& [id, l] : lp.top) EXPECT_TRUE(std::isfinite(l) || l < 0) << id;
    }
  }
  EXPECT_GT(distinct.size(), 8u) << "siblings sample independently";
  EXPECT_EQ(engine->check_integrity(), "");
}

// With speculation on, constrained samples speculate beside unconstrained ones in the same batches
// (their drafts cut to the grammar, each verify row masked after the drafts before it: see
// test_spec_constrained.cpp for parity); outputs stay valid.
TEST(ConstrainEngine, SpeculationLeavesConstrainedSamplesValid) {
  EngineConfig cfg;
  cfg.max_seqs = 16;
  cfg.speculative = SpeculativeConfig::parse("ngram,k=4");
  auto engine = test::json_test_engine(cfg);
  Request free_run;
  for (int i = 0; i < 24; ++i) free_run.prompt.push_back(5 + i % 4);  // repetitive: drafts accepted
  free_run.params.temperature = 0;
  free_run.params.max_tokens = 40;
  auto res = engine->generate(
      {sampled(Constraint::json_schema(json::parse(kPersonSchema)), 8, 1000, 4), free_run});
  for (const Completion& c : res[0].completions) {
    EXPECT_EQ(c.finish_reason, FinishReason::kStop) << c.text;
    check_person(c.text);
  }
  EXPECT_EQ(res[1].completions[0].tokens.size(), 40u);
  EXPECT_GT(engine->stats().speculative.rows, 0) << "the unconstrained request was drafted";
  EXPECT_EQ(engine->check_integrity(), "");
}

TEST(ConstrainEngine, RegexChoiceAndGrammarOutputsMatch) {
  EngineConfig cfg;
  cfg.max_seqs = 16;
  auto engine = test::json_test_engine(cfg);
  const std::string re = R"((\+1 )?\d{3}-\d{4}( x\d{1,4})?)";
  auto res = engine->generate(
      {sampled(Constraint::regex(re), 10, 60, 1),
       sampled(Constraint::choice(json::array({"red", "green", "blue"})), 10, 10, 2),
       sampled(Constraint::grammar(R"G(root ::= "(" item ("," item)* ")"
item ::= [a-z]+ | root)G"),
               10, 400, 3)});
  for (const Completion& c : res[0].completions) {
    EXPECT_TRUE(std::regex_match(c.text, std::regex(re))) << c.text;
    EXPECT_EQ(c.finish_reason, FinishReason::kStop);
  }
  for (const Completion& c : res[1].completions)
    EXPECT_TRUE(c.text == "red" || c.text == "green" || c.text == "blue") << c.text;
  for (const Completion& c : res[2].completions) {
    // Balanced parentheses around comma-separated words.
    int depth = 0;
    bool ok = !c.text.empty() && c.text.front() == '(';
    for (char ch : c.text) {
      depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
      ok = ok && depth >= 0 && (ch == '(' || ch == ')' || ch == ',' || (ch >= 'a' && ch <= 'z'));
    }
    EXPECT_TRUE(ok && depth == 0) << c.text;
  }
}

TEST(ConstrainEngine, StopStringEndsConstrainedOutputEarly) {
  auto engine = test::json_test_engine();
  Request r = sampled(Constraint::regex("(ab)+c"), 1, 50, 4);
  r.params.stop = {"bab"};
  r.params.temperature = 0;  // greedy under the mask: deterministic
  auto res = engine->generate({r});
  const Completion& c = res[0].completions[0];
  EXPECT_TRUE(std::regex_match(c.text, std::regex("(ab)*a?c?"))) << c.text;
  if (c.finish_reason == FinishReason::kStop && !c.stop_reason.empty()) {
    EXPECT_EQ(c.stop_reason, "bab");
  }
}

TEST(ConstrainEngine, PreemptionUnderKvPressureKeepsOutputsValid) {
  EngineConfig cfg;
  cfg.max_seqs = 8;
  cfg.page_size = 4;
  cfg.n_kv_slots = 512;  // far less than 8 samples of a few hundred tokens
  cfg.max_ctx = 512;
  auto engine = test::json_test_engine(cfg);
  // Eight strings of 10..20 characters: a few hundred tokens per sample, six at once.
  const json schema = json::parse(R"({"type":"array","minItems":8,"maxItems":8,
      "items":{"type":"string","minLength":10,"maxLength":20}})");
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i)
    reqs.push_back(sampled(Constraint::json_schema(schema), 1, 500, 10 + i));
  auto res = engine->generate(reqs);
  for (const auto& rr : res)
    for (const Completion& c : rr.completions) {
      EXPECT_EQ(c.finish_reason, FinishReason::kStop) << c.text;
      json j;
      ASSERT_NO_THROW(j = json::parse(c.text)) << c.text;
      ASSERT_TRUE(j.is_array() && j.size() == 8) << c.text;
      for (const json& s : j) ASSERT_TRUE(s.is_string()) << c.text;
    }
  EXPECT_GT(engine->stats().preemptions, 0) << "the scenario must preempt";
  EXPECT_EQ(engine->check_integrity(), "");
}

TEST(ConstrainEngine, BadConstraintsAreRejectedAtSubmit) {
  auto engine = test::json_test_engine();
  auto submit_error = [&](const Constraint& c) {
    try {
      engine->submit(sampled(c, 1, 10, 1));
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(
      submit_error(Constraint::json_schema(json::parse(R"({"type":"string","format":"ipv6"})")))
          .find("unsupported string format 'ipv6'"),
      std::string::npos);
  EXPECT_NE(submit_error(Constraint::regex("(a)\\1")).find("backreferences"), std::string::npos);
  EXPECT_NE(submit_error(Constraint::grammar("root ::= x")).find("never defined"),
            std::string::npos);
  // Engines without a tokenizer cannot constrain.
  EngineConfig cfg;
  ModelConfig mc = ModelConfig::from_json(json::parse(R"({"model_type": "llama",
    "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 1, "intermediate_size": 64,
    "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 128})"));
  Engine bare(Transformer::random(mc, DType::kF32, Device::cpu(), 1), nullptr, cfg);
  EXPECT_THROW(bare.submit(sampled(Constraint::regex("a"), 1, 4, 1)), InvalidArgument);
}

TEST(ConstrainEngine, SamplingParamsJsonKeys) {
  auto p = SamplingParams::from_json(json::parse(
      R"({"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,
          "schema":{"type":"object","properties":{"a":{"type":"string"}}}}}})"));
  EXPECT_EQ(p.constraint.kind, Constraint::Kind::kJsonSchema);
  EXPECT_EQ(SamplingParams::from_json(json::parse(R"({"response_format":{"type":"json_object"}})"))
                .constraint.kind,
            Constraint::Kind::kJsonObject);
  EXPECT_FALSE(SamplingParams::from_json(json::parse(R"({"response_format":{"type":"text"}})"))
                   .constraint.active());
  EXPECT_EQ(SamplingParams::from_json(json::parse(R"({"guided_regex":"a+"})")).constraint.kind,
            Constraint::Kind::kRegex);
  EXPECT_EQ(SamplingParams::from_json(json::parse(R"({"guided_json":"{\"type\":\"integer\"}"})"))
                .constraint.kind,
            Constraint::Kind::kJsonSchema);
  EXPECT_EQ(
      SamplingParams::from_json(json::parse(R"({"guided_choice":["a","b"]})")).constraint.kind,
      Constraint::Kind::kChoice);
  EXPECT_EQ(SamplingParams::from_json(json::parse(R"({"guided_grammar":"root ::= \"a\""})"))
                .constraint.kind,
            Constraint::Kind::kGrammar);
  EXPECT_THROW(
      SamplingParams::from_json(json::parse(R"({"guided_regex":"a","guided_choice":["b"]})")),
      InvalidArgument);
  EXPECT_THROW(SamplingParams::from_json(json::parse(R"({"response_format":{"type":"yaml"}})")),
               InvalidArgument);
  // Round trip.
  auto q = SamplingParams::from_json(
      SamplingParams::from_json(json::parse(R"({"guided_choice":["a","b"]})")).to_json());
  EXPECT_EQ(q.constraint.kind, Constraint::Kind::kChoice);
}

}  // namespace
}  // namespace vela
