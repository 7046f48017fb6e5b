// Draft-model speculation (engine/spec/draft_model.h, rejection.h): the general min(1, p/q) rule
// preserves p exactly (integrated over its uniforms), Sampler::distribution is the distribution
// sample() draws from, and the engine end to end on the CPU fixture model with a draft model:
// greedy output identical with and without it (a draft equal to the target accepts everything, a
// perturbed one some), the sampled distribution preserved (chi-square against the exact joint
// target distribution, with a deliberately different draft), no KV leak (target and draft) under
// cancellation mid-speculation, and clear errors for a draft that does not share the vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "core/json.h"
#include "core/rng.h"
#include "engine/char_tokenizer.h"
#include "engine/chi_square_util.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/runtime/sampler.h"
#include "engine/spec/rejection.h"
#include "engine/spec/spec_config.h"
#include "engine/spec_test_util.h"

namespace vela {
namespace {

using namespace test;  // NOLINT: the shared helpers of spec_test_util.h

TEST(DraftConfig, ParsesAndRejectsWithClearErrors) {
  SpeculativeConfig c = SpeculativeConfig::parse("draft=models/d,k=3");
  EXPECT_EQ(c.method, SpeculativeConfig::Method::kDraft);
  EXPECT_TRUE(c.uses_draft_model());
  EXPECT_EQ(c.draft_dir, "models/d");
  EXPECT_EQ(c.k, 3);
  EXPECT_EQ(c.describe(), "draft=models/d,k=3");
  EXPECT_EQ(SpeculativeConfig::parse("draft=x").k, 4);
  EXPECT_NE(spec_parse_error("draft=").find("needs the draft model's directory"),
            std::string::npos);
  EXPECT_NE(spec_parse_error("draft").find("needs the draft model's directory"), std::string::npos);
  EXPECT_NE(spec_parse_error("draft=d,ngram_max=2").find("unknown key 'ngram_max' for draft"),
            std::string::npos);
  EXPECT_NE(spec_parse_error("draft=d,k=17").find("k must be in [1, 16]"), std::string::npos);
}

// The emitted token's distribution under the general rule, integrated exactly over x ~ q and a
// midpoint grid of both uniforms: equal to p up to the grid's resolution.
std::vector<double> rule_output(const std::vector<float>& p, const std::vector<float>& q,
                                int grid) {
  const int64_t n = static_cast<int64_t>(p.size());
  std::vector<double> out(p.size(), 0.0);
  for (int32_t x = 0; x < n; ++x) {
    if (q[static_cast<size_t>(x)] == 0) continue;
    for (int a = 0; a < grid; ++a) {
      const float ua = (a + 0.5f) / static_cast<float>(grid);
      bool accepted = false;
      int32_t y = verify_draft(p.data(), q.data(), n, x, ua, 0.5f, &accepted);
      if (accepted) {
        out[static_cast<size_t>(y)] += q[static_cast<size_t>(x)] / grid;
        continue;
      }
      for (int r = 0; r < grid; ++r) {
        y = verify_draft(p.data(), q.data(), n, x, ua, (r + 0.5f) / static_cast<float>(grid),
                         &accepted);
        out[static_cast<size_t>(y)] += q[static_cast<size_t>(x)] / grid / grid;
      }
    }
  }
  return out;
}

TEST(Rejection, GeneralRuleEmitsExactlyTheTargetDistribution) {
  // q puts mass where p has none (token 4) and misses a token p likes (token 1).
  const std::vector<float> p = {0.1f, 0.4f, 0.2f, 0.3f, 0.0f, 0.0f};
  const std::vector<float> q = {0.3f, 0.0f, 0.2f, 0.1f, 0.35f, 0.05f};
  std::vector<double> got = rule_output(p, q, 400);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(got[i], p[i], 4e-3) << "token " << i;
  // A point mass q (prompt lookup's drafts) and one-hot p and q (greedy): the same rule.
  const std::vector<float> one_hot = {0, 0, 1, 0, 0, 0};
  got = rule_output(p, one_hot, 400);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(got[i], p[i], 4e-3) << "token " << i;
  bool accepted = true;
  const std::vector<float> greedy_p = {0, 0, 0, 1, 0, 0};
  EXPECT_EQ(verify_draft(greedy_p.data(), one_hot.data(), 6, 2, 0.0f, 0.7f, &accepted), 3);
  EXPECT_FALSE(accepted);
  EXPECT_EQ(verify_draft(one_hot.data(), one_hot.data(), 6, 2, 0.99f, 0.7f, &accepted), 2);
  EXPECT_TRUE(accepted);
  EXPECT_EQ(sample_from_probs(p.data(), 6, 0.0f), 0);
  EXPECT_EQ(sample_from_probs(p.data(), 6, 0.11f), 1);
  EXPECT_EQ(sample_from_probs(p.data(), 6, 0.999f), 3);
}

TEST(SamplerDistribution, IsWhatSampleDraws) {
  // For each seed, sample()'s token equals the inverse-CDF draw from distribution() at the same
  // Philox uniform: the two are one distribution (penalties, bias, temperature, top-k, top-p,
  // min-p), up to rounding at bucket edges.
  const int64_t V = 300;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> base(V);
  for (float& x : base) x = nd(rng);
  std::vector<int32_t> prompt = {1, 2, 3, 7}, output = {7, 7, 9};
  std::vector<SamplingParams> variants(4);
  variants[0].temperature = 0.8f;
  variants[1].top_k = 20;
  variants[1].top_p = 0.7f;
  variants[2].min_p = 0.05f;
  variants[2].repetition_penalty = 1.4f;
  variants[2].frequency_penalty = 0.5f;
  variants[2].logit_bias = {{5, 3.0f}};
  variants[3].temperature = 0.0f;  // greedy: one-hot
  Sampler sampler(V, 1);
  for (size_t v = 0; v < variants.size(); ++v) {
    int mismatches = 0;
    for (uint64_t seed = 0; seed < 400; ++seed) {
      std::vector<SamplerRow> rows = {SamplerRow{&variants[v], &prompt, &output, seed, 3, 0}};
      Tensor a = Tensor::from_vector(base, {1, V}), b = Tensor::from_vector(base, {1, V});
      std::vector<SampleResult> out;
      sampler.sample(a, rows, out);
      std::vector<float> probs(static_cast<size_t>(V));
      sampler.distribution(b, rows, probs.data());
      double sum = 0;
      for (float x : probs) sum += x;
      ASSERT_NEAR(sum, 1.0, 1e-5);
      int32_t y =
          variants[v].is_greedy()
              ? static_cast<int32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin())
              : sample_from_probs(probs.data(), V, philox_uniform(seed, 0, 3));
      mismatches += y != out[0].token;
    }
    EXPECT_LE(mismatches, 2) << "variant " << v;
  }
}

std::vector<std::vector<int32_t>> prompts() {
  return {{3, 9, 27, 81, 3, 9, 27, 81, 3, 9}, {5},       {11, 12, 13, 14, 15, 16, 17},
          {40, 41, 40, 41, 40, 41, 40},       {7, 7, 7}, {100, 3, 77, 100, 3, 77, 100}};
}

class DraftParity : public ::testing::TestWithParam<KvVariant> {};

TEST_P(DraftParity, GreedyOutputIdenticalWithAndWithoutTheDraftModel) {
  const KvVariant v = GetParam();
  Engine plain(Transformer::load(kSpecFixtureModel), nullptr,
               fixture_config(v.strategy, v.page_size, "off"));
  // A draft equal to the target proposes what the target would emit: every draft accepted (its
  // KV followed the accepted tokens exactly); a perturbed one is sometimes wrong.
  Engine same(Transformer::load(kSpecFixtureModel), nullptr,
              draft_fixture_config(v.strategy, v.page_size, 4),
              std::make_unique<Transformer>(Transformer::load(kSpecFixtureModel)));
  Engine other(Transformer::load(kSpecFixtureModel), nullptr,
               draft_fixture_config(v.strategy, v.page_size, 4), perturbed_draft(0.15f, 1));
  std::vector<Request> reqs;
  auto ps = prompts();
  for (size_t i = 0; i < ps.size(); ++i) {
    Request r = make_request(ps[i], 20 + static_cast<int>(i), 0.0f, 0);
    r.params.logprobs = true;
    r.params.top_logprobs = 2;
    if (i % 3 == 1) r.params.repetition_penalty = 1.3f;  // the draft's q uses it too
    if (i % 3 == 2) r.params.n = 2;
    if (i == 4) r.params.speculative = false;  // opts out, in the same batches
    reqs.push_back(r);
  }
  auto a = plain.generate(reqs), b = same.generate(reqs), c = other.generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    for (size_t s = 0; s < a[i].completions.size(); ++s) {
      EXPECT_EQ(a[i].completions[s].tokens, b[i].completions[s].tokens) << "request " << i;
      EXPECT_EQ(a[i].completions[s].tokens, c[i].completions[s].tokens) << "request " << i;
      ASSERT_EQ(a[i].completions[s].logprobs.size(), c[i].completions[s].logprobs.size());
      for (size_t t = 0; t < a[i].completions[s].logprobs.size(); ++t)
        EXPECT_NEAR(a[i].completions[s].logprobs[t].logprob,
                    c[i].completions[s].logprobs[t].logprob, 1e-4);
    }
  }
  SpeculativeStats s1 = same.stats().speculative, s2 = other.stats().speculative;
  std::printf(
      "[draft parity %s] same draft: acceptance %.3f, %.2f tokens/step; perturbed: %.3f, "
      "%.2f\n",
      v.name, s1.acceptance_rate(), s1.tokens_per_step(), s2.acceptance_rate(),
      s2.tokens_per_step());
  EXPECT_GT(s1.rows, 0);
  EXPECT_GT(s1.acceptance_rate(), 0.97);
  EXPECT_GT(s1.draft_forwards, 0);
  EXPECT_GT(s2.accepted, 0);
  EXPECT_LT(s2.accepted, s2.drafted) << "the perturbed draft was never rejected: vacuous";
  for (Engine* e : {&same, &other}) {
    EXPECT_EQ(e->check_integrity(), "");
    EXPECT_EQ(e->stats().kv_pages_used, e->stats().kv_pages_cached) << "pages leaked";
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, DraftParity,
                         ::testing::Values(KvVariant{"contiguous", "contiguous", 1},
                                           KvVariant{"paged4", "paged", 4}),
                         kv_variant_name);

// Seeded draws of four tokens at temperature 1, top-k 3 (81 outcomes), with a draft whose
// distribution differs from the target's (perturbed LM head): drafts are proposed for tokens 2-4,
// accepted and rejected; the histogram against the exact joint target distribution by teacher
// forcing.
TEST(DraftModel, SampledDistributionMatchesTheTargetChiSquare) {
  const float T = 1.0f;
  const int top_k = 3, n_draws = 3000, n_tokens = 4;
  Transformer m = Transformer::load(kSpecFixtureModel);
  const std::vector<int32_t> prompt = {3, 9, 27, 81, 5, 6};
  std::map<std::vector<int32_t>, double> expected;
  std::function<void(std::vector<int32_t>, std::vector<int32_t>, double)> expand =
      [&](std::vector<int32_t> seq, std::vector<int32_t> out, double pr) {
        if (static_cast<int>(out.size()) == n_tokens) {
          expected[out] = pr;
          return;
        }
        std::vector<double> p = target_probs(m, seq, T, top_k);
        for (int32_t a = 0; a < m.config.vocab_size; ++a) {
          if (p[static_cast<size_t>(a)] == 0) continue;
          std::vector<int32_t> s2 = seq, o2 = out;
          s2.push_back(a);
          o2.push_back(a);
          expand(s2, o2, pr * p[static_cast<size_t>(a)]);
        }
      };
  expand(prompt, {}, 1.0);
  EngineConfig cfg = draft_fixture_config("paged", 4, 4);
  cfg.max_seqs = 32;
  cfg.max_tokens_per_step = 256;
  cfg.max_waiting = 2 * n_draws;
  Engine engine(Transformer::load(kSpecFixtureModel), nullptr, cfg, perturbed_draft(0.1f, 2));
  std::vector<Request> reqs;
  for (int i = 0; i < n_draws; ++i) {
    Request r = make_request(prompt, n_tokens, T, 5000 + static_cast<uint64_t>(i));
    r.params.top_k = top_k;
    reqs.push_back(r);
  }
  std::map<std::vector<int32_t>, int> observed;
  for (const RequestResult& r : engine.generate(reqs)) ++observed[r.completions[0].tokens];
  for (const auto& [seq, n] : observed)
    ASSERT_TRUE(expected.count(seq)) << "a sample outside the target's support";
  const test::ChiSquare chi = test::pooled_chi_square(expected, observed, n_draws);
  SpeculativeStats st = engine.stats().speculative;
  std::printf(
      "[draft chi-square] %d draws, %d bins, chi2 %.2f, p %.3f; drafted %lld, accepted "
      "%lld (%.3f), %.2f tokens/step\n",
      n_draws, chi.bins, chi.chi2, chi.p_value, static_cast<long long>(st.drafted),
      static_cast<long long>(st.accepted), st.acceptance_rate(), st.tokens_per_step());
  EXPECT_GT(chi.p_value, 1e-3);
  EXPECT_GT(st.acceptance_rate(), 0.1) << "too few accepted drafts to test acceptance";
  EXPECT_LT(st.acceptance_rate(), 0.9) << "too few rejections to test the residual draw";
  EXPECT_EQ(engine.check_integrity(), "");
}

TEST(DraftModel, CancellationMidSpeculationLeaksNoKv) {
  Engine engine(long_context_model(), nullptr, cancellation_config(draft_speculation(5)),
                std::make_unique<Transformer>(long_context_model()));
  std::vector<RequestHandlePtr> handles;
  for (int i = 0; i < 8; ++i) {
    Request r = make_request({1, 2, 3, 1, 2, 3, 1, 2}, 900, i % 2 ? 0.0f : 0.5f, i);
    handles.push_back(engine.submit(r));
  }
  ASSERT_NO_FATAL_FAILURE(cancel_mid_speculation(engine, handles, /*may_finish=*/false));
  for (auto& h : handles) {
    FinishReason r = h->wait().completions[0].finish_reason;
    EXPECT_TRUE(r == FinishReason::kCancelled || r == FinishReason::kLength);
  }
  expect_drained_after_cancellation(engine);  // the draft cache checked too
  EXPECT_GT(engine.stats().speculative.accepted, 0);
}

json char_vocab_tokenizer(char first) {
  json vocab = json::object();
  for (int i = 0; i < 128; ++i)
    vocab[std::string(1, static_cast<char>(first)) + std::to_string(i)] = i;
  return test::merge_free_bpe_json(vocab);
}

TEST(DraftModel, ADraftWithAnotherVocabularyIsRejectedClearly) {
  auto message = [](std::unique_ptr<Tokenizer> tok, std::unique_ptr<Transformer> draft) {
    try {
      Engine e(Transformer::load(kSpecFixtureModel), std::move(tok),
               draft_fixture_config("paged", 4, 4), std::move(draft));
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ModelConfig mc = ModelConfig::from_json(json::parse(R"({"model_type": "llama",
    "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 1, "intermediate_size": 64,
    "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64})"));
  EXPECT_NE(message(nullptr, std::make_unique<Transformer>(
                                 Transformer::random(mc, DType::kF32, Device::cpu(), 1)))
                .find("vocab_size 64 differs from the target's 128"),
            std::string::npos);
  mc.max_position_embeddings = 32;
  mc.vocab_size = 128;
  EXPECT_NE(message(nullptr, std::make_unique<Transformer>(
                                 Transformer::random(mc, DType::kF32, Device::cpu(), 1)))
                .find("max_position_embeddings 32 is below"),
            std::string::npos);
  // Tokenizers that spell an id differently: loaded from a directory, compared id by id.
  EngineConfig cfg = draft_fixture_config("paged", 4, 4);
  cfg.speculative.draft_dir = ::testing::TempDir() + "/vela_draft_vocab";
  std::filesystem::create_directories(cfg.speculative.draft_dir);
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(kSpecFixtureModel + "/" + f, cfg.speculative.draft_dir + "/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  {
    std::ofstream out(cfg.speculative.draft_dir + "/tokenizer.json");
    out << char_vocab_tokenizer('b').dump();
  }
  std::string what = "no error";
  try {
    Engine e(Transformer::load(kSpecFixtureModel),
             std::make_unique<Tokenizer>(Tokenizer::from_json(char_vocab_tokenizer('a'))), cfg);
  } catch (const InvalidArgument& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("token id 0 is 'a0' for the target but 'b0' for the draft"),
            std::string::npos)
      << what;
  // The same tokenizer loads, and the draft model drafts.
  {
    std::ofstream out(cfg.speculative.draft_dir + "/tokenizer.json");
    out << char_vocab_tokenizer('a').dump();
  }
  Engine ok(Transformer::load(kSpecFixtureModel),
            std::make_unique<Tokenizer>(Tokenizer::from_json(char_vocab_tokenizer('a'))), cfg);
  Completion c = ok.generate({make_request({3, 9, 27, 81}, 12, 0.0f, 0)})[0].completions[0];
  EXPECT_EQ(c.tokens.size(), 12u);
  EXPECT_GT(ok.stats().speculative.accepted, 0);
}

}  // namespace
}  // namespace vela
