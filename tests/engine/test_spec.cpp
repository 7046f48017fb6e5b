// Speculative decoding (engine/spec/): prompt-lookup drafting, config parsing, point-mass
// acceptance, and the engine end to end on the CPU fixture model: greedy and seeded sampled output
// identical with and without speculation (busy mixed batches, every KV strategy, n > 1, logprobs,
// penalties, per-request opt-out, stop strings, max_tokens), the sampled distribution preserved (a
// chi-square test against the exact target distribution), and no KV leak under cancellation.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <thread>

#include "core/json.h"
#include "engine/char_tokenizer.h"
#include "engine/chi_square_util.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/spec/prompt_lookup.h"
#include "engine/spec/rejection.h"
#include "engine/spec/spec_config.h"
#include "engine/spec_test_util.h"

namespace vela {
namespace {

using namespace test;  // NOLINT: the shared helpers of spec_test_util.h

TEST(PromptLookup, ProposesWhatFollowedTheLatestMatchOfTheLongestSuffix) {
  std::vector<int32_t> d;
  // Suffix (7, 8) occurs at 1 and 5; the latest earlier match (5) proposes 9, 7, 8 ... which runs
  // into the end of the sequence and goes on with the drafts themselves.
  EXPECT_EQ(prompt_lookup_propose({1, 7, 8, 3, 4, 7, 8, 9, 7, 8}, {}, 1, 3, 4, d), 4);
  EXPECT_EQ(d, (std::vector<int32_t>{9, 7, 8, 9}));
  // The output counts as context too; a period-1 loop drafts k copies.
  EXPECT_EQ(prompt_lookup_propose({5, 5}, {5}, 1, 3, 3, d), 3);
  EXPECT_EQ(d, (std::vector<int32_t>{5, 5, 5}));
  // No earlier occurrence of any suffix n-gram: nothing.
  EXPECT_EQ(prompt_lookup_propose({1, 2, 3}, {4}, 1, 3, 4, d), 0);
  EXPECT_TRUE(d.empty());
  // Longer n-grams win over shorter, more recent ones: (2, 3) at 1 beats (3) at 5.
  EXPECT_EQ(prompt_lookup_propose({1, 2, 3, 10, 9, 3, 11, 2}, {3}, 1, 2, 1, d), 1);
  EXPECT_EQ(d, (std::vector<int32_t>{10}));
  EXPECT_EQ(prompt_lookup_propose({1, 2, 3, 10, 9, 3, 11, 2}, {3}, 1, 1, 1, d), 1);
  EXPECT_EQ(d, (std::vector<int32_t>{11}));
}

TEST(SpeculativeConfig, ParsesAndRejectsWithClearErrors) {
  SpeculativeConfig c = SpeculativeConfig::parse("ngram,k=5,ngram_max=4,ngram_min=2");
  EXPECT_EQ(c.method, SpeculativeConfig::Method::kNgram);
  EXPECT_EQ(c.k, 5);
  EXPECT_EQ(c.ngram_max, 4);
  EXPECT_EQ(c.ngram_min, 2);
  EXPECT_EQ(c.describe(), "ngram,k=5,ngram_max=4,ngram_min=2");
  EXPECT_FALSE(SpeculativeConfig::parse("off").enabled());
  EXPECT_FALSE(SpeculativeConfig::parse("").enabled());
  EXPECT_EQ(SpeculativeConfig::parse("ngram").k, 4);
  EXPECT_NE(spec_parse_error("medusa").find("unknown method 'medusa'"), std::string::npos);
  EXPECT_NE(spec_parse_error("ngram,k=0").find("k must be in [1, 16]"), std::string::npos);
  EXPECT_NE(spec_parse_error("ngram,k=x").find("k must be an integer"), std::string::npos);
  EXPECT_NE(spec_parse_error("ngram,depth=2").find("unknown key 'depth'"), std::string::npos);
  EXPECT_NE(spec_parse_error("ngram,k").find("expected key=value"), std::string::npos);
}

TEST(SpeculativeConfig, RequestFieldOptsOut) {
  EXPECT_TRUE(SamplingParams::from_json(json::object()).speculative);
  EXPECT_FALSE(SamplingParams::from_json(json{{"speculative", false}}).speculative);
  EXPECT_EQ(SamplingParams::from_json(json{{"speculative", false}}).to_json()["speculative"],
            false);
  EXPECT_THROW(SamplingParams::from_json(json{{"speculative", 1}}), InvalidArgument);
}

TEST(Rejection, PointMassAcceptsTheMatchingPrefix) {
  const int32_t drafts[3] = {4, 5, 6};
  const int32_t all[4] = {4, 5, 6, 9}, first[4] = {1, 5, 6, 9}, mid[4] = {4, 5, 7, 9};
  EXPECT_EQ(accept_point_mass(all, drafts, 3), 3);    // 3 drafts + the bonus token 9
  EXPECT_EQ(accept_point_mass(first, drafts, 3), 0);  // the correction token 1 only
  EXPECT_EQ(accept_point_mass(mid, drafts, 3), 2);    // 4 5, then 7
  EXPECT_EQ(accept_point_mass(all, drafts, 0), 0);
}

// Repetitive prompts (prompt lookup finds matches) and plain ones, of mixed lengths.
std::vector<std::vector<int32_t>> spec_prompts() {
  return {{3, 9, 27, 81, 3, 9, 27, 81, 3, 9},
          {5},
          {11, 12, 13, 14, 15, 16, 17},
          {40, 41, 40, 41, 40, 41, 40},
          {7, 7, 7, 7},
          {100, 3, 77, 100, 3, 77, 100, 3, 77, 100, 3, 77, 100},
          {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}};
}

class SpecParity : public ::testing::TestWithParam<KvVariant> {};

TEST_P(SpecParity, OutputIdenticalWithAndWithoutSpeculation) {
  const KvVariant v = GetParam();
  Engine plain(Transformer::load(kSpecFixtureModel), nullptr,
               fixture_config(v.strategy, v.page_size, "off"));
  Engine spec(Transformer::load(kSpecFixtureModel), nullptr,
              fixture_config(v.strategy, v.page_size, "ngram,k=4"));
  std::vector<Request> reqs;
  auto prompts = spec_prompts();
  for (size_t i = 0; i < prompts.size(); ++i) {
    reqs.push_back(make_request(prompts[i], 20 + static_cast<int>(i), 0.0f, 0));  // greedy
    Request s = make_request(prompts[i], 18, 0.7f, 100 + i);                      // sampled
    s.params.logprobs = true;
    s.params.top_logprobs = 2;
    if (i % 3 == 0) s.params.n = 2;
    if (i % 3 == 1) s.params.repetition_penalty = 1.3f;
    if (i == 4) s.params.speculative = false;  // opts out, in the same batches
    reqs.push_back(s);
  }
  auto a = plain.generate(reqs), b = spec.generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(a[i].completions.size(), b[i].completions.size());
    for (size_t c = 0; c < a[i].completions.size(); ++c) {
      const Completion &x = a[i].completions[c], &y = b[i].completions[c];
      EXPECT_EQ(x.tokens, y.tokens) << "request " << i << " sample " << c;
      EXPECT_EQ(y.tokens.size(), static_cast<size_t>(reqs[i].params.max_tokens));
      EXPECT_EQ(y.finish_reason, FinishReason::kLength);
      ASSERT_EQ(x.logprobs.size(), y.logprobs.size());
      for (size_t t = 0; t < x.logprobs.size(); ++t) {
        EXPECT_NEAR(x.logprobs[t].logprob, y.logprobs[t].logprob, 1e-4);
        ASSERT_EQ(x.logprobs[t].top.size(), y.logprobs[t].top.size());
      }
    }
  }
  EngineStats st = spec.stats();
  EXPECT_GT(st.speculative.rows, 0);
  EXPECT_GT(st.speculative.accepted, 0) << "no draft was ever accepted: the test is vacuous";
  EXPECT_LT(st.speculative.accepted, st.speculative.drafted);
  EXPECT_GT(st.speculative.tokens_per_step(), 1.0);
  EXPECT_EQ(st.generated_tokens, plain.stats().generated_tokens);
  EXPECT_EQ(st.kv_pages_used, st.kv_pages_cached) << "pages leaked";
  EXPECT_EQ(spec.check_integrity(), "");
  EXPECT_EQ(plain.stats().speculative.rows, 0);
}

INSTANTIATE_TEST_SUITE_P(Strategies, SpecParity,
                         ::testing::Values(KvVariant{"contiguous", "contiguous", 1},
                                           KvVariant{"paged1", "paged", 1},
                                           KvVariant{"paged16", "paged", 16}),
                         kv_variant_name);

TEST(Spec, KvPressurePreemptsAndDropsDraftsWithoutChangingOutput) {
  // A pool of 96 slots for 4 rows of up to 50 tokens: drafts must sometimes be dropped for lack of
  // pages, and tasks preempted (recomputed); the output still equals the unpressured run.
  EngineConfig loose = fixture_config("paged", 4, "off");
  EngineConfig tight = fixture_config("paged", 4, "ngram,k=6");
  tight.n_kv_slots = 96;
  Engine plain(Transformer::load(kSpecFixtureModel), nullptr, loose);
  Engine spec(Transformer::load(kSpecFixtureModel), nullptr, tight);
  std::vector<Request> reqs;
  auto prompts = spec_prompts();
  for (size_t i = 0; i < prompts.size(); ++i)
    reqs.push_back(make_request(prompts[i], 30, i % 2 ? 0.8f : 0.0f, 7 + i));
  auto a = plain.generate(reqs), b = spec.generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(a[i].completions[0].tokens, b[i].completions[0].tokens) << "request " << i;
  EngineStats st = spec.stats();
  EXPECT_GT(st.preemptions, 0) << "no KV pressure: the test is vacuous";
  EXPECT_GT(st.speculative.accepted, 0);
  EXPECT_EQ(st.kv_pages_used, st.kv_pages_cached) << "pages leaked";
  EXPECT_EQ(spec.check_integrity(), "");
}

TEST(Spec, StopStringsAndStopTokensCutAcceptedDrafts) {
  // One printable character per token (engine/char_tokenizer.h).
  EngineConfig off = fixture_config("paged", 4, "off"),
               on = fixture_config("paged", 4, "ngram,k=6");
  Engine plain(Transformer::load(kSpecFixtureModel), test::char_tokenizer(), off);
  Engine spec(Transformer::load(kSpecFixtureModel), test::char_tokenizer(), on);
  for (const auto& prompt : spec_prompts()) {
    Request r = make_request(prompt, 30, 0.0f, 0);
    Completion full = plain.generate({r})[0].completions[0];
    ASSERT_EQ(full.tokens.size(), 30u);
    // A stop string made of the text of tokens 9 and 10, and (separately) token 12 as a stop token.
    std::string t9 = plain.tokenizer()->decode({full.tokens[9]});
    std::string t10 = plain.tokenizer()->decode({full.tokens[10]});
    Request s = r;
    s.params.stop = {t9.substr(t9.size() - 1) + t10.substr(0, 1)};
    Request k = r;
    k.params.stop_token_ids = {full.tokens[12]};
    for (const Request& q : {s, k}) {
      Completion x = plain.generate({q})[0].completions[0];
      Completion y = spec.generate({q})[0].completions[0];
      EXPECT_EQ(x.tokens, y.tokens);
      EXPECT_EQ(x.text, y.text);
      EXPECT_EQ(x.finish_reason, y.finish_reason);
      EXPECT_EQ(x.stop_reason, y.stop_reason);
    }
  }
  EXPECT_GT(spec.stats().speculative.accepted, 0);
  EXPECT_EQ(spec.check_integrity(), "");
  EXPECT_EQ(spec.stats().kv_pages_used, spec.stats().kv_pages_cached);
}

TEST(ChiSquare, PValueMatchesKnownQuantiles) {
  EXPECT_NEAR(chi_square_p_value(3.841, 1), 0.05, 1e-3);
  EXPECT_NEAR(chi_square_p_value(18.307, 10), 0.05, 1e-3);
  EXPECT_NEAR(chi_square_p_value(82.529, 63), 0.05, 1e-3);
  EXPECT_NEAR(chi_square_p_value(63.0, 63), 0.475, 0.01);
}

// Seeded draws of the first three tokens, with prompt lookup proposing drafts at tokens 2 and 3
// (top-k 3 keeps the joint to 27 outcomes): their histogram against the exact joint target
// distribution computed by teacher forcing. The prompt ends with the model's own greedy
// continuation, so the likely tokens occur in it and drafts are both accepted and rejected.
TEST(Spec, SampledDistributionMatchesTheTargetChiSquare) {
  const float T = 1.0f;
  const int top_k = 3, n_draws = 3000;
  Transformer m = Transformer::load(kSpecFixtureModel);
  std::vector<int32_t> prompt = {3, 9, 27, 81};
  for (int i = 0; i < 20; ++i) {
    std::vector<double> p = target_probs(m, prompt, T, 1);
    prompt.push_back(static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin()));
  }
  std::map<std::vector<int32_t>, double> expected;  // (t1, t2, t3) -> probability
  std::vector<double> p1 = target_probs(m, prompt, T, top_k);
  for (int32_t a = 0; a < 128; ++a) {
    if (p1[static_cast<size_t>(a)] == 0) continue;
    std::vector<int32_t> s1 = prompt;
    s1.push_back(a);
    std::vector<double> p2 = target_probs(m, s1, T, top_k);
    for (int32_t b = 0; b < 128; ++b) {
      if (p2[static_cast<size_t>(b)] == 0) continue;
      std::vector<int32_t> s2 = s1;
      s2.push_back(b);
      std::vector<double> p3 = target_probs(m, s2, T, top_k);
      for (int32_t c = 0; c < 128; ++c)
        if (p3[static_cast<size_t>(c)] > 0)
          expected[{a, b, c}] =
              p1[static_cast<size_t>(a)] * p2[static_cast<size_t>(b)] * p3[static_cast<size_t>(c)];
    }
  }
  EngineConfig cfg = fixture_config("paged", 4, "ngram,k=4");
  cfg.max_seqs = 32;
  cfg.max_tokens_per_step = 256;
  cfg.max_waiting = 2 * n_draws;
  Engine engine(Transformer::load(kSpecFixtureModel), nullptr, cfg);
  std::vector<Request> reqs;
  for (int i = 0; i < n_draws; ++i) {
    Request r = make_request(prompt, 3, T, 1000 + static_cast<uint64_t>(i));
    r.params.top_k = top_k;
    reqs.push_back(r);
  }
  std::map<std::vector<int32_t>, int> observed;
  for (const RequestResult& r : engine.generate(reqs)) ++observed[r.completions[0].tokens];
  for (const auto& [seq, n] : observed)
    ASSERT_TRUE(expected.count(seq)) << "a sample outside the target's support";
  const test::ChiSquare chi = test::pooled_chi_square(expected, observed, n_draws);
  EngineStats st = engine.stats();
  std::printf(
      "[spec chi-square] %d draws, %d bins, chi2 %.2f, p %.3f; drafted %lld, accepted %lld\n",
      n_draws, chi.bins, chi.chi2, chi.p_value, static_cast<long long>(st.speculative.drafted),
      static_cast<long long>(st.speculative.accepted));
  EXPECT_GT(chi.p_value, 1e-3);
  EXPECT_GT(st.speculative.accepted, n_draws / 20) << "too few accepted drafts to test acceptance";
  EXPECT_LT(st.speculative.accepted, st.speculative.drafted) << "no rejections to test";
}

TEST(Spec, CancellationMidSpeculationLeaksNoKv) {
  // A random model (greedy from a repetitive prompt loops, so drafts are accepted) with a long
  // context; requests are cancelled while they speculate, others go on.
  Engine engine(long_context_model(), nullptr,
                cancellation_config(SpeculativeConfig::parse("ngram,k=5")));
  std::vector<RequestHandlePtr> handles;
  for (int i = 0; i < 8; ++i) {
    Request r = make_request({1, 2, 3, 1, 2, 3, 1, 2}, 900, i % 2 ? 0.0f : 0.5f, i);
    handles.push_back(engine.submit(r));
  }
  ASSERT_NO_FATAL_FAILURE(cancel_mid_speculation(engine, handles, /*may_finish=*/false));
  int n_cancelled = 0;
  for (auto& h : handles) {
    FinishReason r = h->wait().completions[0].finish_reason;
    EXPECT_TRUE(r == FinishReason::kCancelled || r == FinishReason::kLength);
    n_cancelled += r == FinishReason::kCancelled;
  }
  EXPECT_GE(n_cancelled, 4);
  expect_drained_after_cancellation(engine);
}

}  // namespace
}  // namespace vela
