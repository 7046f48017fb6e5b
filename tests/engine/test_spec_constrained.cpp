// Speculative decoding (prompt lookup) of constrained samples (issue 17): the grammar walk of the
// drafts (GrammarMatcher::accepted_prefix, BatchMasks groups masking verify row j after drafts
// [0 .. j) and leaving the matcher where it was); the engine end to end on the CPU fixture model
// with a character tokenizer: greedy and seeded sampled output identical with and without
// speculation for JSON Schema, regex, choice, EBNF and json_object constraints (n > 1, logprobs,
// stop strings, penalties, every KV strategy), every output valid under its grammar, the sampled
// distribution under a grammar preserved (chi-square against the exact masked target
// distribution), and no KV leak under cancellation mid-speculation.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <thread>

#include "engine/constrain/batch_masks.h"
#include "engine/engine_test_util.h"
#include "engine/spec_constrain_util.h"

namespace vela {
namespace {

using namespace test;  // NOLINT: the shared helpers of spec_constrain_util.h

TEST(SpecGrammarWalk, GroupMasksFollowTheDraftsAndLeaveTheMatcherUnchanged) {
  auto engine = json_test_engine();
  const Tokenizer& tok = *engine->tokenizer();
  auto g = engine->compile_constraint(Constraint::regex("(ab|ba)+c"));
  constrain::GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_token(encode(tok, "a")[0]));
  const int32_t steps = m.n_steps();
  // Drafts b a b c x: the grammar takes "b a b c" and ends there (nothing may follow c).
  std::vector<int32_t> drafts = encode(tok, "babca");
  EXPECT_EQ(m.accepted_prefix(drafts.data(), 5), 4);
  EXPECT_EQ(m.n_steps(), steps);
  std::vector<int32_t> bad = encode(tok, "b-");
  EXPECT_EQ(m.accepted_prefix(bad.data(), 2), 1);
  // Masks of rows 3 .. 7 (4 drafts) against masks computed one step at a time.
  const int64_t V = g->vocab().size(), W = (V + 31) / 32;
  constrain::BatchMasks masks(V, 16, Device::cpu());
  masks.add(m, 3, drafts.data(), 4);
  masks.fill();
  EXPECT_EQ(masks.size(), 5);
  EXPECT_EQ(m.n_steps(), steps) << "fill() rolls the matcher back";
  EXPECT_EQ(masks.row_bits(2), nullptr);
  EXPECT_EQ(masks.row_bits(8), nullptr);
  std::vector<uint32_t> want(static_cast<size_t>(W));
  for (int32_t j = 0; j <= 4; ++j) {
    m.fill_next_token_bitmask(want.data());
    const uint32_t* got = masks.row_bits(3 + j);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(std::vector<uint32_t>(got, got + W), want) << "row after " << j << " drafts";
    if (j < 4) {
      ASSERT_TRUE(m.accept_token(drafts[static_cast<size_t>(j)]));
    }
  }
  EXPECT_FALSE(allowed(want, drafts[4])) << "after c only the end may follow";
  m.rollback(4);
  masks.clear();
  EXPECT_EQ(masks.size(), 0);
  EXPECT_EQ(masks.row_bits(3), nullptr);
}

class SpecConstrainedParity : public ::testing::TestWithParam<KvVariant> {};

TEST_P(SpecConstrainedParity, OutputIdenticalWithAndWithoutSpeculation) {
  const KvVariant v = GetParam();
  auto plain = fixture_engine(fixture_config(v.strategy, v.page_size, "off"));
  auto spec = fixture_engine(fixture_config(v.strategy, v.page_size, "ngram,k=4"));
  const std::vector<Request> reqs = constrained_requests(*plain->tokenizer());
  auto a = plain->generate(reqs), b = spec->generate(reqs);
  int n_stopped = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(a[i].completions.size(), b[i].completions.size());
    for (size_t c = 0; c < a[i].completions.size(); ++c) {
      const Completion &x = a[i].completions[c], &y = b[i].completions[c];
      const std::string at = "request " + std::to_string(i) + " sample " + std::to_string(c);
      EXPECT_EQ(x.tokens, y.tokens) << at << ": '" << x.text << "' vs '" << y.text << "'";
      EXPECT_EQ(x.text, y.text) << at;
      EXPECT_EQ(x.finish_reason, y.finish_reason) << at;
      EXPECT_EQ(x.stop_reason, y.stop_reason) << at;
      EXPECT_TRUE(y.error.empty()) << at << ": " << y.error;
      ASSERT_EQ(x.logprobs.size(), y.logprobs.size()) << at;
      for (size_t t = 0; t < x.logprobs.size(); ++t) {
        EXPECT_NEAR(x.logprobs[t].logprob, y.logprobs[t].logprob, 1e-4) << at << " token " << t;
        ASSERT_EQ(x.logprobs[t].top.size(), y.logprobs[t].top.size());
        for (size_t k = 0; k < x.logprobs[t].top.size(); ++k) {
          EXPECT_EQ(x.logprobs[t].top[k].first, y.logprobs[t].top[k].first) << at;
          const float lx = x.logprobs[t].top[k].second, ly = y.logprobs[t].top[k].second;
          if (std::isinf(lx) || std::isinf(ly))  // masked out (fewer allowed tokens than asked)
            EXPECT_EQ(lx, ly) << at;
          else
            EXPECT_NEAR(lx, ly, 1e-4) << at;
        }
      }
      expect_valid(*spec, reqs[i].params.constraint, y, at);
      n_stopped += y.finish_reason == FinishReason::kStop;
    }
  }
  EngineStats st = spec->stats();
  std::printf(
      "[spec constrained %s] rows %lld, drafted %lld, accepted %lld (%.3f), %.2f tok/step\n",
      v.name, static_cast<long long>(st.speculative.rows),
      static_cast<long long>(st.speculative.drafted),
      static_cast<long long>(st.speculative.accepted), st.speculative.acceptance_rate(),
      st.speculative.tokens_per_step());
  EXPECT_GT(n_stopped, 4) << "most constrained samples end their grammar or hit a stop string";
  EXPECT_GT(st.speculative.rows, 0) << "constrained samples were never drafted";
  EXPECT_GT(st.speculative.accepted, 0) << "no draft was ever accepted: the test is vacuous";
  EXPECT_LT(st.speculative.accepted, st.speculative.drafted);
  EXPECT_GT(st.speculative.tokens_per_step(), 1.0);
  EXPECT_EQ(st.generated_tokens, plain->stats().generated_tokens);
  EXPECT_EQ(st.kv_pages_used, st.kv_pages_cached) << "pages leaked";
  EXPECT_EQ(spec->check_integrity(), "");
}

INSTANTIATE_TEST_SUITE_P(Strategies, SpecConstrainedParity,
                         ::testing::Values(KvVariant{"contiguous", "contiguous", 1},
                                           KvVariant{"paged4", "paged", 4}),
                         kv_variant_name);

TEST(SpecConstrained, KvPressurePreemptsAndDropsDraftsWithoutChangingOutput) {
  // A pool of 96 slots for 4 rows: drafts are sometimes dropped for lack of pages and tasks
  // preempted (recomputed; the matcher keeps its state with the output); the output still equals
  // the unpressured run without speculation.
  EngineConfig tight = fixture_config("paged", 4, "ngram,k=6");
  tight.n_kv_slots = 96;
  auto plain = fixture_engine(fixture_config("paged", 4, "off"));
  auto spec = fixture_engine(tight);
  const std::vector<Request> reqs = constrained_requests(*plain->tokenizer());
  auto a = plain->generate(reqs), b = spec->generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    for (size_t c = 0; c < a[i].completions.size(); ++c) {
      EXPECT_EQ(a[i].completions[c].tokens, b[i].completions[c].tokens) << "request " << i;
      expect_valid(*spec, reqs[i].params.constraint, b[i].completions[c],
                   "request " + std::to_string(i));
    }
  EngineStats st = spec->stats();
  std::printf("[spec constrained kv pressure] %lld preemptions, %lld steps (%lld plain)\n",
              static_cast<long long>(st.preemptions), static_cast<long long>(st.steps),
              static_cast<long long>(plain->stats().steps));
  EXPECT_GT(st.preemptions, 0) << "no KV pressure: the test is vacuous";
  EXPECT_GT(st.speculative.accepted, 0);
  EXPECT_EQ(st.kv_pages_used, st.kv_pages_cached) << "pages leaked";
  EXPECT_EQ(spec->check_integrity(), "");
}

// Seeded draws of a three-character constrained output (the second token's allowed set depends on
// the first), with prompt lookup drafting tokens 2 and 3 (cut where the grammar ends): their
// histogram against the exact masked joint target distribution.
TEST(SpecConstrained, SampledDistributionUnderAGrammarMatchesTheTargetChiSquare) {
  const int n_draws = 3000;
  EngineConfig cfg = fixture_config("paged", 4, "ngram,k=4");
  cfg.max_seqs = 32;
  cfg.max_tokens_per_step = 256;
  cfg.max_waiting = 2 * n_draws;
  auto engine = fixture_engine(cfg);
  Transformer model = Transformer::load(kSpecFixtureModel);
  double p_value = 0;
  int bins = 0;
  constrained_chi_square(*engine, model, n_draws, 5000, &p_value, &bins);
  ASSERT_FALSE(HasFatalFailure());
  EngineStats st = engine->stats();
  std::printf(
      "[spec constrained chi-square] %d draws, %d bins, p %.3f; drafted %lld, accepted %lld\n",
      n_draws, bins, p_value, static_cast<long long>(st.speculative.drafted),
      static_cast<long long>(st.speculative.accepted));
  EXPECT_GT(p_value, 1e-3);
  EXPECT_GT(st.speculative.accepted, n_draws / 20) << "too few accepted drafts to test acceptance";
  EXPECT_LT(st.speculative.accepted, st.speculative.drafted) << "no rejections to test";
  EXPECT_EQ(engine->check_integrity(), "");
}

TEST(SpecConstrained, CancellationMidSpeculationLeaksNoKvAndOutputsStayValid) {
  // The random JSON-test model (long context): greedy under a mask loops, so drafts are accepted.
  auto engine = json_test_engine(cancellation_config(SpeculativeConfig::parse("ngram,k=5")));
  ASSERT_NO_FATAL_FAILURE(cancel_constrained_mid_speculation(*engine));
  expect_drained_after_cancellation(*engine);
}

}  // namespace
}  // namespace vela
