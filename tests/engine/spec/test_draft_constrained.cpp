// Draft-model speculation of constrained samples (issue 17) on the CPU fixture model with a
// character tokenizer: the draft draws under the grammar's mask (drafts are always valid) and the
// target's verify rows are masked after the drafts before them. Greedy output identical with and
// without a draft model (a draft equal to the target accepts nearly everything, a perturbed one
// some) for JSON Schema, regex, choice, EBNF and json_object constraints with n > 1, logprobs and
// stop strings; every output valid under its grammar; the sampled distribution under a grammar
// preserved by the general rule on the masked p and q (chi-square); no KV leak (target and draft)
// under cancellation mid-speculation.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "engine/engine_test_util.h"
#include "engine/spec_constrain_util.h"

namespace vela {
namespace {

using namespace test;  // NOLINT: the shared helpers of spec_constrain_util.h

class DraftConstrainedParity : public ::testing::TestWithParam<KvVariant> {};

TEST_P(DraftConstrainedParity, GreedyOutputIdenticalWithAndWithoutTheDraftModel) {
  const KvVariant v = GetParam();
  auto plain = fixture_engine(fixture_config(v.strategy, v.page_size, "off"));
  auto same = fixture_engine(draft_fixture_config(v.strategy, v.page_size, 4),
                             std::make_unique<Transformer>(Transformer::load(kSpecFixtureModel)));
  auto other =
      fixture_engine(draft_fixture_config(v.strategy, v.page_size, 4), perturbed_draft(0.15f, 1));
  std::vector<Request> reqs;
  for (Request r : constrained_requests(*plain->tokenizer())) {
    if (r.params.temperature != 0.0f) {  // the sampled twin of each: greedy, with a penalty
      r.params.temperature = 0.0f;
      r.params.repetition_penalty = 1.3f;  // the draft's q uses it too
    }
    reqs.push_back(r);
  }
  auto a = plain->generate(reqs), b = same->generate(reqs), c = other->generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(a[i].completions.size(), c[i].completions.size());
    for (size_t s = 0; s < a[i].completions.size(); ++s) {
      const std::string at = "request " + std::to_string(i) + " sample " + std::to_string(s);
      const Completion &x = a[i].completions[s], &y = b[i].completions[s], &z = c[i].completions[s];
      EXPECT_EQ(x.tokens, y.tokens) << at << ": '" << x.text << "' vs '" << y.text << "'";
      EXPECT_EQ(x.tokens, z.tokens) << at << ": '" << x.text << "' vs '" << z.text << "'";
      EXPECT_EQ(x.text, z.text) << at;
      EXPECT_EQ(x.finish_reason, z.finish_reason) << at;
      EXPECT_EQ(x.stop_reason, z.stop_reason) << at;
      ASSERT_EQ(x.logprobs.size(), z.logprobs.size()) << at;
      for (size_t t = 0; t < x.logprobs.size(); ++t)
        EXPECT_NEAR(x.logprobs[t].logprob, z.logprobs[t].logprob, 1e-4) << at << " token " << t;
      expect_valid(*other, reqs[i].params.constraint, z, at);
      expect_valid(*same, reqs[i].params.constraint, y, at);
    }
  }
  SpeculativeStats s1 = same->stats().speculative, s2 = other->stats().speculative;
  std::printf(
      "[draft constrained %s] same draft: acceptance %.3f, %.2f tokens/step; perturbed: %.3f, "
      "%.2f\n",
      v.name, s1.acceptance_rate(), s1.tokens_per_step(), s2.acceptance_rate(),
      s2.tokens_per_step());
  EXPECT_GT(s1.rows, 0);
  // Drawn under the mask, the same model's drafts are the target's own greedy choices.
  EXPECT_GT(s1.acceptance_rate(), 0.97);
  EXPECT_GT(s1.tokens_per_step(), 2.0);
  EXPECT_GT(s2.accepted, 0);
  EXPECT_LT(s2.accepted, s2.drafted) << "the perturbed draft was never rejected: vacuous";
  for (Engine* e : {same.get(), other.get()}) {
    EXPECT_EQ(e->check_integrity(), "");
    EXPECT_EQ(e->stats().kv_pages_used, e->stats().kv_pages_cached) << "pages leaked";
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, DraftConstrainedParity,
                         ::testing::Values(KvVariant{"contiguous", "contiguous", 1},
                                           KvVariant{"paged4", "paged", 4}),
                         kv_variant_name);

// Sampled constrained requests through the general rule (n = 2 siblings, logprobs, stop strings,
// penalties): every output valid, no errors, finite logprobs of the emitted (allowed) tokens.
TEST(DraftConstrained, SampledRequestsStayValid) {
  auto engine = fixture_engine(draft_fixture_config("paged", 4, 4), perturbed_draft(0.15f, 3));
  std::vector<Request> reqs = constrained_requests(*engine->tokenizer());
  for (Request& r : reqs) r.params.temperature = 0.9f;
  auto res = engine->generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    for (size_t s = 0; s < res[i].completions.size(); ++s) {
      const Completion& x = res[i].completions[s];
      const std::string at = "request " + std::to_string(i) + " sample " + std::to_string(s);
      EXPECT_TRUE(x.error.empty()) << at << ": " << x.error;
      expect_valid(*engine, reqs[i].params.constraint, x, at);
      ASSERT_EQ(x.logprobs.size(), x.tokens.size()) << at;
      for (const TokenLogprob& lp : x.logprobs) EXPECT_TRUE(std::isfinite(lp.logprob)) << at;
    }
  SpeculativeStats st = engine->stats().speculative;
  EXPECT_GT(st.accepted, 0);
  EXPECT_LT(st.accepted, st.drafted);
  EXPECT_EQ(engine->check_integrity(), "");
  EXPECT_EQ(engine->stats().kv_pages_used, engine->stats().kv_pages_cached) << "pages leaked";
}

// Seeded draws of a three-character constrained output at temperature 1 with an unrelated draft:
// q is the draft's masked distribution, p the target's, and the general rule's output is the
// exact masked joint target distribution.
TEST(DraftConstrained, SampledDistributionUnderAGrammarMatchesTheTargetChiSquare) {
  const int n_draws = 3000;
  EngineConfig cfg = draft_fixture_config("paged", 4, 3);
  cfg.max_seqs = 32;
  cfg.max_tokens_per_step = 256;
  cfg.max_waiting = 2 * n_draws;
  Transformer model = Transformer::load(kSpecFixtureModel);
  // A draft unrelated to the target (random weights of its shape): q far from p, many rejections.
  auto engine = fixture_engine(cfg, std::make_unique<Transformer>(Transformer::random(
                                        model.config, DType::kF32, Device::cpu(), 2, 0.3f)));
  double p_value = 0;
  int bins = 0;
  constrained_chi_square(*engine, model, n_draws, 9000, &p_value, &bins);
  ASSERT_FALSE(HasFatalFailure());
  SpeculativeStats st = engine->stats().speculative;
  std::printf(
      "[draft constrained chi-square] %d draws, %d bins, p %.3f; drafted %lld, accepted %lld "
      "(%.3f), %.2f tokens/step\n",
      n_draws, bins, p_value, static_cast<long long>(st.drafted),
      static_cast<long long>(st.accepted), st.acceptance_rate(), st.tokens_per_step());
  EXPECT_GT(p_value, 1e-3);
  EXPECT_GT(st.acceptance_rate(), 0.1) << "too few accepted drafts to test acceptance";
  EXPECT_LT(st.acceptance_rate(), 0.9) << "too few rejections to test the residual draw";
  EXPECT_EQ(engine->check_integrity(), "");
}

TEST(DraftConstrained, CancellationMidSpeculationLeaksNoKvAndOutputsStayValid) {
  // The random JSON-test model as target and (the same seed) draft: long contexts, drafts
  // accepted; requests cancelled while they speculate.
  Engine engine(json_test_model(11), json_test_tokenizer(),
                cancellation_config(draft_speculation(5)),
                std::make_unique<Transformer>(json_test_model(11)));
  ASSERT_NO_FATAL_FAILURE(cancel_constrained_mid_speculation(engine));
  expect_drained_after_cancellation(engine);  // the draft cache checked too
  EXPECT_GT(engine.stats().speculative.accepted, 0);
}

}  // namespace
}  // namespace vela
