// Sampler tests: each transform against hand-computed logits or an independent double-precision
// model of the filtered distribution (predicting the exact token from the Philox uniform), greedy
// ties, raw logprobs vs ops::log_softmax, seeded reproducibility across batch orders, and an
// empirical chi-square check of temperature + top-p.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/test_util.h"
#include "engine/runtime/sampler.h"
#include "engine/sampler_test_util.h"
#include "ops/softmax.h"

namespace vela {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor make_logits(const std::vector<std::vector<float>>& rows) {
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return Tensor::from_vector(
      flat, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.at(0).size())});
}

std::vector<float> row_of(const Tensor& t, int64_t r) {
  std::vector<float> all = t.to_vector<float>();
  const int64_t v = t.size(1);
  return std::vector<float>(all.begin() + r * v, all.begin() + (r + 1) * v);
}

// One row with the given params; returns the result (logits modified in place).
SampleResult sample_one(Sampler& sampler, Tensor& logits, const SamplingParams& p,
                        const std::vector<int32_t>& prompt = {},
                        const std::vector<int32_t>& output = {}, uint64_t seed = 0,
                        uint64_t step = 0, uint64_t stream = 0) {
  std::vector<SamplerRow> rows{{&p, &prompt, &output, seed, step, stream}};
  std::vector<SampleResult> out;
  sampler.sample(logits, rows, out);
  return out.at(0);
}

// Independent model of the pipeline after penalties/bias: temperature, top-k (ties kept), top-p
// (smallest most-probable prefix reaching top_p, ties by lower id), min-p; returns normalized
// probabilities (0 for dropped tokens), in double.
std::vector<double> filtered_probs(const std::vector<float>& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  double m = -INFINITY;
  for (float l : logits) m = std::max(m, static_cast<double>(l));
  std::vector<double> prob(n);
  for (size_t i = 0; i < n; ++i) prob[i] = std::exp((logits[i] - m) / p.temperature);
  std::vector<bool> keep(n, true);
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::vector<float> sorted = logits;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    float kth = sorted[static_cast<size_t>(p.top_k) - 1];
    for (size_t i = 0; i < n; ++i) keep[i] = logits[i] >= kth;
  }
  if (p.top_p < 1.0f) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return logits[a] > logits[b]; });
    double total = 0;
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) total += prob[i];
    double cum = 0;
    bool reached = false;
    for (size_t i : order) {
      if (!keep[i]) continue;
      if (reached) {
        keep[i] = false;
        continue;
      }
      cum += prob[i];
      if (cum >= p.top_p * total) reached = true;
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (prob[i] < p.min_p) keep[i] = false;  // prob is already p / p_max
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += keep[i] ? prob[i] : 0.0;
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = keep[i] ? prob[i] / total : 0.0;
  return out;
}

// The token an inverse-CDF draw in id order picks for uniform u.
int32_t inverse_cdf(const std::vector<double>& probs, float u) {
  double cum = 0;
  int32_t last = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    cum += probs[i];
    last = static_cast<int32_t>(i);
    if (cum > u) return last;
  }
  return last;
}

std::vector<float> random_logits(int64_t n, uint64_t seed, float scale = 3.0f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.normal() * scale;
  return v;
}

TEST(Sampler, GreedyPicksArgmaxWithTiesToLowerId) {
  Sampler sampler(5, 4);
  SamplingParams p;
  p.temperature = 0.0f;
  Tensor logits = make_logits({{1, 3, 3, 2, -1}, {0, 0, 0, 0, 0}, {-kInf, -kInf, 2, 2, 7}});
  std::vector<SamplerRow> rows{
      {&p, nullptr, nullptr, 1, 0}, {&p, nullptr, nullptr, 2, 0}, {&p, nullptr, nullptr, 3, 0}};
  std::vector<SampleResult> out;
  sampler.sample(logits, rows, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].token, 1);
  EXPECT_EQ(out[1].token, 0);
  EXPECT_EQ(out[2].token, 4);
  // Greedy ignores the filters and the seed.
  p.top_k = 3;
  p.top_p = 0.5f;
  p.min_p = 0.9f;
  Tensor again = make_logits({{1, 3, 3, 2, -1}});
  EXPECT_EQ(sample_one(sampler, again, p, {}, {}, 99, 5).token, 1);
  EXPECT_EQ(argmax_lower_id(std::vector<float>{-kInf, -kInf}.data(), 2), 0);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  Sampler sampler(5, 1);
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  Tensor logits = make_logits({{2.0f, -2.0f, 1.0f, 0.5f, 0.0f}});
  // Token 0 in the prompt, token 1 twice in the output, token 4 (logit 0) in both: each is
  // penalized once; tokens 2 and 3 are untouched.
  SampleResult r = sample_one(sampler, logits, p, {0, 4}, {1, 1, 4});
  EXPECT_EQ(row_of(sampler.processed_logits(), 0),
            (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f, 0.0f}));
  EXPECT_EQ(r.token, 0);  // 1.0 vs 1.0: ties to the lower id
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountGeneratedTokensOnly) {
  Sampler sampler(4, 1);
  SamplingParams p;
  p.temperature = 0.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Tensor logits = make_logits({{1.0f, 1.0f, 1.0f, 1.0f}});
  SampleResult r = sample_one(sampler, logits, p, /*prompt=*/{0, 0, 0}, /*output=*/{2, 3, 2});
  // 2: 1 - 0.25 * 2 - 0.5 = 0; 3: 1 - 0.25 - 0.5 = 0.25; prompt-only token 0 untouched.
  EXPECT_EQ(row_of(sampler.processed_logits(), 0), (std::vector<float>{1.0f, 1.0f, 0.0f, 0.25f}));
  EXPECT_EQ(r.token, 0);
  // The scratch counts are cleared between rows: the same call again gives the same result.
  Tensor again = make_logits({{1.0f, 1.0f, 1.0f, 1.0f}});
  sample_one(sampler, again, p, {0, 0, 0}, {2, 3, 2});
  EXPECT_EQ(row_of(sampler.processed_logits(), 0), (std::vector<float>{1.0f, 1.0f, 0.0f, 0.25f}));
}

TEST(Sampler, PenaltiesApplyInVllmOrder) {
  Sampler sampler(3, 1);
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.25f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 1.0f;
  p.logit_bias = {{1, 0.75f}};
  Tensor logits = make_logits({{3.0f, -1.0f, 0.5f}});
  sample_one(sampler, logits, p, {2}, {0, 1, 0});
  // 0: 3 / 1.25 - 2 - 0.5; 1: -1 * 1.25 - 1 - 0.5 + 0.75; 2 (prompt only): 0.5 / 1.25.
  std::vector<float> want{3.0f / 1.25f - 2.0f - 0.5f, -1.0f * 1.25f - 1.0f - 0.5f + 0.75f,
                          0.5f / 1.25f};
  std::vector<float> got = row_of(sampler.processed_logits(), 0);
  for (size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(Sampler, LogitBiasShiftsAndMinusInfinityBans) {
  Sampler sampler(4, 1);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.logit_bias = {{3, 5.0f}};
  Tensor logits = make_logits({{2.0f, 1.0f, 0.0f, -2.5f}});
  EXPECT_EQ(sample_one(sampler, logits, greedy).token, 3);
  EXPECT_EQ(row_of(sampler.processed_logits(), 0)[3], 2.5f);

  SamplingParams p;  // temperature 1: token 0 would take ~64% of the draws
  p.logit_bias = {{0, -kInf}};
  for (uint64_t step = 0; step < 500; ++step) {
    Tensor l = make_logits({{2.0f, 1.0f, 0.0f, -2.5f}});
    EXPECT_NE(sample_one(sampler, l, p, {}, {}, 7, step).token, 0);
  }
  // Everything banned: no distribution left, the lowest id comes back (no crash, no NaN).
  p.logit_bias = {{0, -kInf}, {1, -kInf}, {2, -kInf}, {3, -kInf}};
  Tensor l = make_logits({{2.0f, 1.0f, 0.0f, -2.5f}});
  EXPECT_EQ(sample_one(sampler, l, p).token, 0);
}

// Temperature, top-k, top-p and min-p on a 5-token distribution: the token of every draw equals
// the inverse CDF (in id order) of the hand-filtered distribution at the same Philox uniform.
TEST(Sampler, EachFilterMatchesTheAnalyticDistributionDrawByDraw) {
  const std::vector<float> probs{0.05f, 0.5f, 0.15f, 0.2f, 0.1f};
  std::vector<float> base;
  for (float q : probs) base.push_back(std::log(q));
  struct Case {
    const char* name;
    float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
    int32_t top_k = 0;
    std::set<int32_t> kept;
  };
  std::vector<Case> cases{
      {"temperature 1", 1.0f, 1.0f, 0.0f, 0, {0, 1, 2, 3, 4}},
      {"temperature 0.5", 0.5f, 1.0f, 0.0f, 0, {0, 1, 2, 3, 4}},
      {"temperature 2", 2.0f, 1.0f, 0.0f, 0, {0, 1, 2, 3, 4}},
      {"top_k 2", 1.0f, 1.0f, 0.0f, 2, {1, 3}},
      {"top_k 5 (off)", 1.0f, 1.0f, 0.0f, 5, {0, 1, 2, 3, 4}},
      // 0.5, 0.7 (< 0.8), 0.85 (>= 0.8): three tokens.
      {"top_p 0.8", 1.0f, 0.8f, 0.0f, 0, {1, 2, 3}},
      {"top_p 0.45", 1.0f, 0.45f, 0.0f, 0, {1}},
      {"top_p 0.3", 1.0f, 0.3f, 0.0f, 0, {1}},
      // p >= 0.35 * 0.5 = 0.175: tokens 1 and 3.
      {"min_p 0.35", 1.0f, 1.0f, 0.35f, 0, {1, 3}},
      {"min_p 0.19", 1.0f, 1.0f, 0.19f, 0, {1, 2, 3, 4}},
      // top-k 4 -> {1,3,2,4} renormalized by 0.95; top-p 0.9 needs 0.855: 0.5, 0.7, 0.85 -> add 4.
      {"top_k 4 + top_p 0.9", 1.0f, 0.9f, 0.0f, 4, {1, 2, 3, 4}},
      // top-p 0.75 keeps {1, 3, 2}; min-p 0.35 then drops 2.
      {"top_p + min_p", 1.0f, 0.75f, 0.35f, 0, {1, 3}},
      {"temperature 0.7 + top_p 0.9", 0.7f, 0.9f, 0.0f, 0, {}},
  };
  Sampler sampler(5, 1);
  for (const Case& c : cases) {
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.top_k = c.top_k;
    p.min_p = c.min_p;
    std::vector<double> want = filtered_probs(base, p);
    std::set<int32_t> analytic_kept;
    for (int32_t i = 0; i < 5; ++i)
      if (want[static_cast<size_t>(i)] > 0) analytic_kept.insert(i);
    if (!c.kept.empty()) {
      EXPECT_EQ(analytic_kept, c.kept) << c.name << " (test model)";
    }
    std::set<int32_t> seen;
    for (uint64_t step = 0; step < 400; ++step) {
      Tensor l = make_logits({base});
      int32_t tok = sample_one(sampler, l, p, {}, {}, 1234, step, 3).token;
      EXPECT_EQ(tok, inverse_cdf(want, philox_uniform(1234, 3, step)))
          << c.name << " step " << step;
      seen.insert(tok);
    }
    EXPECT_EQ(seen, analytic_kept) << c.name;
  }
}

// SamplerRow::want_probs: the distribution each row was drawn from, as the analytic model gives
// it (temperature, top-k, top-p, min-p after penalties and bias), one-hot for greedy rows, with
// rows that did not ask left alone; the token drawn is the same as without it.
TEST(Sampler, ReportsTheDistributionItDrawsFrom) {
  const int64_t vocab = 2000;
  Sampler sampler(vocab, 8);
  std::vector<SamplingParams> ps(6);
  ps[0].temperature = 0.7f;
  ps[1].top_k = 30;
  ps[2].top_p = 0.8f;
  ps[3].min_p = 0.1f;
  ps[3].logit_bias = {{5, 3.0f}};
  ps[4].temperature = 1.3f;
  ps[4].top_k = 200;
  ps[4].top_p = 0.9f;
  ps[5].temperature = 0.0f;  // greedy: one-hot
  std::vector<std::vector<float>> raw;
  for (uint64_t i = 0; i < ps.size(); ++i) raw.push_back(random_logits(vocab, 70 + i, 2.0f));
  Tensor logits = make_logits(raw);
  std::vector<SamplerRow> rows;
  for (size_t i = 0; i < ps.size(); ++i) rows.push_back({&ps[i], nullptr, nullptr, 3, i, 0, true});
  std::vector<SampleResult> out, plain;
  sampler.sample(logits, rows, out);
  std::vector<float> probs = sampler.probabilities().to_vector<float>();
  for (size_t r = 0; r < ps.size(); ++r) {
    std::vector<float> biased = raw[r];
    for (const auto& [id, b] : ps[r].logit_bias) biased[static_cast<size_t>(id)] += b;
    std::vector<double> want(static_cast<size_t>(vocab), 0.0);
    if (ps[r].is_greedy()) {
      want[static_cast<size_t>(argmax_lower_id(biased.data(), vocab))] = 1.0;
    } else {
      want = filtered_probs(biased, ps[r]);
    }
    double sum = 0.0, worst = 0.0;
    for (int64_t i = 0; i < vocab; ++i) {
      const float got = probs[r * vocab + i];
      sum += got;
      worst = std::max(worst, std::fabs(got - want[static_cast<size_t>(i)]));
      if (want[static_cast<size_t>(i)] == 0.0) {
        EXPECT_EQ(got, 0.0f) << "row " << r << " token " << i << " is outside the kept set";
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
    EXPECT_LT(worst, 1e-6) << "row " << r;
    EXPECT_GT(probs[r * vocab + out[r].token], 0.0f) << "row " << r;
  }
  // The same rows without want_probs draw the same tokens.
  for (SamplerRow& row : rows) row.want_probs = false;
  sampler.sample(logits, rows, plain);
  for (size_t r = 0; r < ps.size(); ++r) EXPECT_EQ(plain[r].token, out[r].token) << r;
}

TEST(Sampler, TopKOneEqualsGreedy) {
  const int64_t vocab = 1000;
  Sampler sampler(vocab, 1);
  for (uint64_t trial = 0; trial < 20; ++trial) {
    std::vector<float> v = random_logits(vocab, trial);
    int32_t want = argmax_lower_id(v.data(), vocab);
    SamplingParams p;
    p.temperature = 1.5f;
    p.top_k = 1;
    Tensor l = make_logits({v});
    EXPECT_EQ(sample_one(sampler, l, p, {}, {}, trial * 31 + 1, trial).token, want);
  }
}

// Large vocabularies take the heap (small k), nth_element (large k) and progressive partial-sort
// (top-p over many candidates) paths; every draw must match the analytic inverse CDF.
TEST(Sampler, LargeVocabularyFiltersMatchTheAnalyticModel) {
  const int64_t vocab = 20000;
  Sampler sampler(vocab, 2);
  struct Case {
    float temperature, top_p, min_p;
    int32_t top_k;
    float logit_scale;
  };
  // Scale 0.3 keeps the distribution flat, so top-p 0.5 spans thousands of tokens.
  std::vector<Case> cases{{0.9f, 1.0f, 0.0f, 40, 3.0f},  {1.0f, 1.0f, 0.0f, 12000, 0.3f},
                          {1.0f, 0.5f, 0.0f, 0, 0.3f},   {0.8f, 0.9f, 0.0f, 100, 3.0f},
                          {1.2f, 0.95f, 0.05f, 0, 2.0f}, {1.0f, 1.0f, 0.2f, 0, 2.0f}};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    std::vector<float> v = random_logits(vocab, 100 + ci, c.logit_scale);
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    std::vector<double> want = filtered_probs(v, p);
    int64_t n_kept = std::count_if(want.begin(), want.end(), [](double q) { return q > 0; });
    int64_t n_match = 0;
    const int n_draws = 100;
    for (int step = 0; step < n_draws; ++step) {
      Tensor l = make_logits({v});
      int32_t tok = sample_one(sampler, l, p, {}, {}, 5, static_cast<uint64_t>(step)).token;
      ASSERT_GT(want[static_cast<size_t>(tok)], 0.0) << "case " << ci << " sampled dropped " << tok;
      n_match += tok == inverse_cdf(want, philox_uniform(5, 0, static_cast<uint64_t>(step)));
    }
    // With thousands of kept tokens, float vs double rounding can move a draw that lands within
    // ~1e-7 of a CDF boundary to the neighbour; allow a couple of such draws.
    EXPECT_GE(n_match, n_draws - 2) << "case " << ci << " (" << n_kept << " kept tokens)";
  }
}

TEST(Sampler, LogprobsAreLogSoftmaxOfRawLogits) {
  const int64_t vocab = 1000;
  Sampler sampler(vocab, 4);
  std::vector<std::vector<float>> raw{random_logits(vocab, 1), random_logits(vocab, 2),
                                      random_logits(vocab, 3)};
  // Row 1: a three-way tie for the best raw logit (ids 7, 3, 500): top_logprobs lists 3, 7, 500.
  float best = *std::max_element(raw[1].begin(), raw[1].end()) + 1.0f;
  raw[1][7] = raw[1][3] = raw[1][500] = best;
  Tensor raw_t = make_logits(raw);
  Tensor want = Tensor::empty(raw_t.shape(), DType::kF32);
  ops::log_softmax(raw_t, want);
  std::vector<float> want_v = want.to_vector<float>();

  SamplingParams sampled;  // penalties and bias modify the row: logprobs must still be raw
  sampled.logprobs = true;
  sampled.top_logprobs = 5;
  sampled.repetition_penalty = 1.3f;
  sampled.logit_bias = {{10, 4.0f}};
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.logprobs = true;
  greedy.top_logprobs = 20;
  SamplingParams none;  // no logprobs asked: none reported
  std::vector<int32_t> prompt{1, 2, 3}, output{7, 8};
  Tensor logits = raw_t.clone();
  std::vector<SamplerRow> rows{{&sampled, &prompt, &output, 11, 4},
                               {&greedy, &prompt, &output, 12, 4},
                               {&none, &prompt, &output, 13, 4}};
  std::vector<SampleResult> out;
  sampler.sample(logits, rows, out);
  for (int64_t r = 0; r < 2; ++r) {
    const SampleResult& res = out[static_cast<size_t>(r)];
    const float* lp = want_v.data() + r * vocab;
    EXPECT_NEAR(res.logprob, lp[res.token], 1e-5f) << "row " << r;
    const auto k = static_cast<size_t>(rows[static_cast<size_t>(r)].params->top_logprobs);
    ASSERT_EQ(res.top_logprobs.size(), k);
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return lp[a] > lp[b]; });
    for (size_t j = 0; j < k; ++j) {
      EXPECT_EQ(res.top_logprobs[j].first, ids[j]) << "row " << r << " rank " << j;
      EXPECT_NEAR(res.top_logprobs[j].second, lp[ids[j]], 1e-5f);
      if (j > 0) {
        EXPECT_GE(res.top_logprobs[j - 1].second, res.top_logprobs[j].second);
      }
    }
  }
  EXPECT_EQ(out[1].top_logprobs[0].first, 3);
  EXPECT_EQ(out[1].top_logprobs[1].first, 7);
  EXPECT_EQ(out[1].top_logprobs[2].first, 500);
  EXPECT_EQ(out[2].logprob, 0.0f);
  EXPECT_TRUE(out[2].top_logprobs.empty());
  // Reusing `out` for a call without logprobs clears the old lists.
  SamplingParams plain;
  std::vector<SamplerRow> rows2{{&plain, nullptr, nullptr, 1, 0}};
  Tensor one = make_logits({raw[0]});
  sampler.sample(one, rows2, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].top_logprobs.empty());
}

// LogprobsMode::kTempered (GRPO's behaviour log-probs): log_softmax of the penalized, biased row
// divided by T, untruncated (top-p / top-k do not renormalize it); greedy rows at T = 1.
TEST(Sampler, TemperedLogprobsAreLogSoftmaxOfTheProcessedRowOverT) {
  const int64_t vocab = 1000;
  Sampler sampler(vocab, 4);
  std::vector<std::vector<float>> raw{random_logits(vocab, 4), random_logits(vocab, 5),
                                      random_logits(vocab, 6)};
  SamplingParams hot, cold, greedy;
  for (SamplingParams* p : {&hot, &cold, &greedy}) {
    p->logprobs = true;
    p->top_logprobs = 5;
    p->logprobs_mode = LogprobsMode::kTempered;
    p->logit_bias = {{10, 4.0f}};
    p->repetition_penalty = 1.3f;
  }
  hot.temperature = 1.0f;
  hot.top_p = 0.9f;
  cold.temperature = 0.7f;
  cold.top_k = 50;
  greedy.temperature = 0.0f;
  std::vector<int32_t> prompt{1, 2, 3}, output{7, 8};
  Tensor logits = make_logits(raw);
  std::vector<SamplerRow> rows{{&hot, &prompt, &output, 11, 4},
                               {&cold, &prompt, &output, 12, 4},
                               {&greedy, &prompt, &output, 13, 4}};
  std::vector<SampleResult> out;
  sampler.sample(logits, rows, out);
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::vector<double> want =
        test::tempered_logprobs(raw[r].data(), vocab, *rows[r].params, prompt, output);
    EXPECT_NEAR(out[r].logprob, want[static_cast<size_t>(out[r].token)], 1e-5) << "row " << r;
    ASSERT_EQ(out[r].top_logprobs.size(), 5u);
    for (const auto& [id, v] : out[r].top_logprobs)
      EXPECT_NEAR(v, want[static_cast<size_t>(id)], 1e-5) << "row " << r << " id " << id;
  }
  // The same row in raw mode reports the raw log-softmax, which differs at T = 0.7.
  SamplingParams raw_mode = cold;
  raw_mode.logprobs_mode = LogprobsMode::kRaw;
  Tensor again = make_logits({raw[1]});
  std::vector<SamplerRow> rows2{{&raw_mode, &prompt, &output, 12, 4}};
  sampler.sample(again, rows2, out);
  const std::vector<double> tempered =
      test::tempered_logprobs(raw[1].data(), vocab, cold, prompt, output);
  EXPECT_GT(std::fabs(out[0].logprob - tempered[static_cast<size_t>(out[0].token)]), 1e-3);
}

TEST(Sampler, SeededSamplingIsReproducibleAndIndependentOfBatchOrder) {
  const int64_t vocab = 300;
  Sampler sampler(vocab, 8);
  std::vector<SamplingParams> params(6);
  params[0].temperature = 0.8f;
  params[1].top_k = 20;
  params[2].top_p = 0.7f;
  params[3].min_p = 0.05f;
  params[3].presence_penalty = 0.3f;
  params[4].temperature = 0.0f;
  params[5].temperature = 1.3f;
  params[5].repetition_penalty = 1.1f;
  std::vector<std::vector<float>> logits_of;
  for (uint64_t i = 0; i < 6; ++i) logits_of.push_back(random_logits(vocab, 40 + i, 1.0f));
  std::vector<int32_t> prompt{1, 2, 3, 250}, output{4, 4, 9};
  auto row_for = [&](size_t i, uint64_t step) {
    // Rows 0 and 1 are two parallel samples (streams) of one seed.
    return SamplerRow{&params[i], &prompt,         &output, i < 2 ? 777u : 1000u + i,
                      step,       i == 1 ? 1u : 0u};
  };
  auto run = [&](const std::vector<size_t>& order, uint64_t step) {
    std::vector<std::vector<float>> l;
    std::vector<SamplerRow> rows;
    for (size_t i : order) {
      l.push_back(logits_of[i]);
      rows.push_back(row_for(i, step));
    }
    Tensor t = make_logits(l);
    std::vector<SampleResult> out;
    sampler.sample(t, rows, out);
    std::vector<int32_t> by_row(6, -1);
    for (size_t j = 0; j < order.size(); ++j) by_row[order[j]] = out[j].token;
    return by_row;
  };
  for (uint64_t step = 0; step < 10; ++step) {
    std::vector<int32_t> a = run({0, 1, 2, 3, 4, 5}, step);
    EXPECT_EQ(a, run({0, 1, 2, 3, 4, 5}, step)) << "step " << step;
    EXPECT_EQ(a, run({5, 3, 1, 4, 0, 2}, step)) << "step " << step;
    // Each row alone (batch of one) gives the same token as inside the batch.
    for (size_t i = 0; i < 6; ++i) {
      std::vector<int32_t> alone = run({i}, step);
      EXPECT_EQ(alone[i], a[i]) << "row " << i << " step " << step;
    }
  }
  // Different steps and streams draw different numbers: the sequences are not all equal.
  std::set<std::vector<int32_t>> distinct;
  for (uint64_t step = 0; step < 10; ++step) distinct.insert(run({0, 1}, step));
  EXPECT_GT(distinct.size(), 1u);
  int n_stream_diff = 0;
  for (uint64_t step = 0; step < 20; ++step) {
    std::vector<int32_t> t = run({0, 1}, step);
    n_stream_diff += t[0] != t[1];
  }
  EXPECT_GT(n_stream_diff, 0);
}

// 20k draws from a 5-token distribution at temperature 0.7, top_p 0.9 against the analytically
// filtered distribution: chi-square below the 0.999 quantile for its degrees of freedom.
TEST(Sampler, EmpiricalDistributionMatchesTemperatureAndTopP) {
  const std::vector<float> logits{1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  std::vector<double> want = filtered_probs(logits, p);
  const int n_batch = 1000, n_batches = 20;
  Sampler sampler(5, n_batch);
  std::vector<int64_t> counts(5, 0);
  std::vector<SampleResult> out;
  for (int b = 0; b < n_batches; ++b) {
    std::vector<std::vector<float>> l(n_batch, logits);
    std::vector<SamplerRow> rows;
    for (int i = 0; i < n_batch; ++i)
      rows.push_back({&p, nullptr, nullptr, 2024, static_cast<uint64_t>(b * n_batch + i)});
    Tensor t = make_logits(l);
    sampler.sample(t, rows, out);
    for (const SampleResult& r : out) ++counts[static_cast<size_t>(r.token)];
  }
  const double n = n_batch * n_batches;
  double chi2 = 0;
  int df = -1;
  for (size_t i = 0; i < 5; ++i) {
    if (want[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " is outside the top-p set";
      continue;
    }
    double e = want[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++df;
  }
  // 0.999 quantiles of chi-square with 1..4 degrees of freedom.
  const double kQuantile[] = {0, 10.83, 13.82, 16.27, 18.47};
  ASSERT_GE(df, 2);
  EXPECT_LT(chi2, kQuantile[df]) << "df " << df;
}

TEST(Sampler, RejectsBadInputs) {
  Sampler sampler(4, 2);
  SamplingParams p;
  std::vector<SampleResult> out;
  Tensor wrong_vocab = Tensor::zeros({1, 5}, DType::kF32);
  std::vector<SamplerRow> one{{&p, nullptr, nullptr, 0, 0}};
  EXPECT_THROW_WITH(sampler.sample(wrong_vocab, one, out), InvalidArgument, "4 columns");
  Tensor three = Tensor::zeros({3, 4}, DType::kF32);
  std::vector<SamplerRow> rows3(3, one[0]);
  EXPECT_THROW_WITH(sampler.sample(three, rows3, out), InvalidArgument, "max_rows");
  Tensor l = Tensor::zeros({1, 4}, DType::kF32);
  std::vector<SamplerRow> null_params{{nullptr, nullptr, nullptr, 0, 0}};
  EXPECT_THROW_WITH(sampler.sample(l, null_params, out), InvalidArgument, "SamplingParams");
  p.logit_bias = {{9, 1.0f}};
  EXPECT_THROW_WITH(sampler.sample(l, one, out), InvalidArgument, "logit_bias", "9");
  p.logit_bias.clear();
  p.repetition_penalty = 1.2f;
  std::vector<int32_t> bad_prompt{1, 4};
  std::vector<SamplerRow> bad{{&p, &bad_prompt, nullptr, 0, 0}};
  EXPECT_THROW_WITH(sampler.sample(l, bad, out), InvalidArgument, "prompt", "4");
  // The failed call left the scratch clean: a valid call still works.
  std::vector<int32_t> ok_prompt{1, 2};
  std::vector<SamplerRow> good{{&p, &ok_prompt, nullptr, 0, 0}};
  EXPECT_NO_THROW(sampler.sample(l, good, out));
}

}  // namespace
}  // namespace vela
