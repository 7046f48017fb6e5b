// The Sampler's op path on the CPU (ops/cpu/sampling.cpp, vectorised) against the plain
// ReferenceSampler (sampler_test_util.h): greedy on random and tied logits, every filter
// configuration over thousands of rows (agreement rate printed),
// raw logprobs vs log_softmax, the incremental count table across decode steps, an empirical
// distribution check (total variation) for top-k + top-p, and errors on bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "engine/runtime/sampler.h"
#include "engine/sampler_test_util.h"
#include "ops/softmax.h"

namespace vela {
namespace {

using test::agree;
using test::draw_histogram;
using test::sampling_configs;
using test::sampling_logits;
using test::top_k_top_p_weights;
using test::total_variation;

TEST(SamplerOpCpu, GreedyMatchesArgmaxOnRandomAndTiedLogits) {
  const int64_t vocab = 1000;
  Sampler dev(vocab, 16, Device::cpu());
  SamplingParams p;
  p.temperature = 0.0f;
  Tensor logits = sampling_logits(16, vocab, 3);
  // Rows with ties at the max: all-equal rows, a few ties, and -0.0 vs +0.0.
  float* x = logits.data<float>();
  for (int64_t i = 0; i < vocab; ++i) x[1 * vocab + i] = 0.5f;
  x[2 * vocab + 700] = 100.0f;
  x[2 * vocab + 300] = 100.0f;
  for (int64_t i = 0; i < vocab; ++i) x[3 * vocab + i] = -1.0f;
  x[3 * vocab + 9] = -0.0f;
  x[3 * vocab + 5] = 0.0f;
  x[4 * vocab + 11] = std::numeric_limits<float>::quiet_NaN();
  std::vector<SamplerRow> rows(16, SamplerRow{&p, nullptr, nullptr, 1, 0});
  std::vector<SampleResult> out;
  dev.sample(logits, rows, out);
  for (int64_t r = 0; r < 16; ++r)
    EXPECT_EQ(out[static_cast<size_t>(r)].token, argmax_lower_id(x + r * vocab, vocab)) << r;
  EXPECT_EQ(out[1].token, 0);
  EXPECT_EQ(out[2].token, 300);
  EXPECT_EQ(out[3].token, 5);
}

TEST(SamplerOpCpu, AgreesWithTheReferenceOnEveryConfig) {
  const int64_t vocab = 4096, n_rows = 1000;
  Sampler dev(vocab, 64, Device::cpu());
  test::ReferenceSampler cpu(vocab);
  Tensor logits = sampling_logits(n_rows, vocab, 11);
  int64_t total = 0, same = 0;
  for (const auto& cfg : sampling_configs(vocab)) {
    test::Agreement a = agree(dev, cpu, logits, cfg.params, 77);
    std::printf("  [cpu vs reference] %-16s %lld/%lld rows agree (%.4f%%)\n", cfg.name.c_str(),
                static_cast<long long>(a.same), static_cast<long long>(a.rows), 100.0 * a.rate());
    EXPECT_GE(a.rate(), 0.999) << cfg.name;
    if (cfg.name == "greedy" || cfg.name == "penalties_greedy") {
      EXPECT_EQ(a.same, a.rows);
    }
    EXPECT_LE(a.max_logprob_err_ppm, 10) << cfg.name;
    total += a.rows;
    same += a.same;
  }
  std::printf("  [cpu vs reference] all configs: %lld/%lld\n", static_cast<long long>(same),
              static_cast<long long>(total));
}

// Top-p over more than 4096 candidates takes the bucketed search (only the bucket where the
// running mass crosses the target is searched): against the reference's full sort.
TEST(SamplerOpCpu, TopPOverLargeCandidateSetsAgreesWithTheReference) {
  const int64_t vocab = 32000, n_rows = 128;
  Sampler dev(vocab, 64, Device::cpu());
  test::ReferenceSampler ref(vocab);
  Tensor logits = sampling_logits(n_rows, vocab, 23, 6.0f, 2.0f);
  for (float top_p : {0.3f, 0.9f, 0.995f}) {
    for (float temperature : {0.8f, 1.6f}) {
      SamplingParams p;
      p.top_p = top_p;
      p.temperature = temperature;
      p.min_p = top_p > 0.99f ? 0.01f : 0.0f;
      test::Agreement a = agree(dev, ref, logits, p, 5);
      EXPECT_GE(a.rate(), 0.99) << "top_p " << top_p << " T " << temperature;
    }
  }
}

TEST(SamplerOpCpu, LogprobsEqualLogSoftmaxOfRawLogits) {
  const int64_t vocab = 3000;
  Sampler dev(vocab, 8, Device::cpu());
  Tensor logits = sampling_logits(8, vocab, 5);
  Tensor ref = Tensor::empty({8, vocab}, DType::kF32);
  ops::log_softmax(logits, ref);
  SamplingParams p;
  p.logprobs = true;
  p.top_logprobs = 20;
  p.repetition_penalty = 1.5f;  // logprobs stay those of the raw logits
  p.logit_bias = {{2, 10.0f}};
  std::vector<int32_t> prompt{1, 2, 3};
  std::vector<SamplerRow> rows(8, SamplerRow{&p, &prompt, nullptr, 9, 0});
  for (size_t r = 0; r < rows.size(); ++r) rows[r].step = r;
  std::vector<SampleResult> out;
  dev.sample(logits, rows, out);
  const float* lp = ref.data<float>();
  for (int64_t r = 0; r < 8; ++r) {
    const SampleResult& res = out[static_cast<size_t>(r)];
    EXPECT_NEAR(res.logprob, lp[r * vocab + res.token], 1e-5);
    ASSERT_EQ(res.top_logprobs.size(), 20u);
    for (size_t j = 0; j < 20; ++j) {
      EXPECT_NEAR(res.top_logprobs[j].second, lp[r * vocab + res.top_logprobs[j].first], 1e-5);
      if (j > 0) {
        EXPECT_GE(res.top_logprobs[j - 1].second, res.top_logprobs[j].second);
      }
    }
  }
}

// LogprobsMode::kTempered through the op's CPU twin: the processed row over T, untruncated.
TEST(SamplerOpCpu, TemperedLogprobsAreLogSoftmaxOfTheProcessedRowOverT) {
  const int64_t vocab = 3000;
  Sampler dev(vocab, 8, Device::cpu());
  Tensor logits = sampling_logits(8, vocab, 6);
  std::vector<SamplingParams> ps(4);
  for (SamplingParams& p : ps) {
    p.logprobs = true;
    p.top_logprobs = 20;
    p.logprobs_mode = LogprobsMode::kTempered;
    p.repetition_penalty = 1.5f;
    p.logit_bias = {{2, 10.0f}};
  }
  ps[0].temperature = 0.7f;
  ps[1].temperature = 1.0f;
  ps[1].top_p = 0.8f;
  ps[2].temperature = 1.5f;
  ps[2].top_k = 30;
  ps[3].temperature = 0.0f;
  std::vector<int32_t> prompt{1, 2, 3};
  std::vector<SamplerRow> rows;
  for (size_t r = 0; r < 8; ++r) rows.push_back({&ps[r % 4], &prompt, nullptr, 9, r});
  std::vector<SampleResult> out;
  dev.sample(logits, rows, out);
  const float* x = logits.data<float>();
  for (size_t r = 0; r < 8; ++r) {
    const std::vector<double> want = test::tempered_logprobs(x + static_cast<int64_t>(r) * vocab,
                                                             vocab, *rows[r].params, prompt, {});
    EXPECT_NEAR(out[r].logprob, want[static_cast<size_t>(out[r].token)], 1e-5) << r;
    ASSERT_EQ(out[r].top_logprobs.size(), 20u);
    for (const auto& [id, v] : out[r].top_logprobs)
      EXPECT_NEAR(v, want[static_cast<size_t>(id)], 1e-5) << r;
  }
}

// Decode loop: the incremental count-table mode (reset_slot at admission, slots per step) must give
// the tokens the history mode (what the engine uses) gives when handed the growing prompt + output
// every step.
TEST(SamplerOpCpu, IncrementalCountsMatchFullHistory) {
  const int64_t vocab = 600;
  const int32_t n_seqs = 5;
  Sampler dev(vocab, n_seqs, Device::cpu(), /*max_slots=*/8);
  Sampler cpu(vocab, n_seqs);
  SamplingParams p;
  p.repetition_penalty = 1.4f;
  p.frequency_penalty = 0.6f;
  p.presence_penalty = 0.4f;
  p.temperature = 0.9f;
  std::vector<std::vector<int32_t>> prompts = test::random_histories(n_seqs, vocab, 30, 2);
  std::vector<std::vector<int32_t>> outputs(n_seqs);
  std::vector<int32_t> slots{6, 0, 3, 1, 7};
  for (int32_t s = 0; s < n_seqs; ++s) dev.reset_slot(slots[s], prompts[s]);
  std::vector<SampleResult> got, want;
  for (uint64_t step = 0; step < 40; ++step) {
    Tensor logits = sampling_logits(n_seqs, vocab, 100 + step, 3.0f);
    std::vector<SamplerRow> rows;
    for (int32_t s = 0; s < n_seqs; ++s)
      rows.push_back({&p, &prompts[s], &outputs[s], static_cast<uint64_t>(s), step});
    dev.stage(rows, &slots);
    dev.launch(logits);
    dev.finish(got);
    Tensor copy = logits.clone();
    cpu.sample(copy, rows, want);
    for (int32_t s = 0; s < n_seqs; ++s) {
      ASSERT_EQ(got[s].token, want[s].token) << "seq " << s << " step " << step;
      outputs[s].push_back(got[s].token);
    }
  }
  // The table holds (output count << 1) | in_prompt.
  const int32_t* c = dev.counts().data<int32_t>();
  for (int32_t s = 0; s < n_seqs; ++s) {
    std::map<int32_t, int32_t> expect;
    for (int32_t t : prompts[s]) expect[t] |= 1;
    for (int32_t t : outputs[s]) expect[t] += 2;
    int64_t nonzero = 0;
    for (int64_t i = 0; i < vocab; ++i) nonzero += c[slots[s] * vocab + i] != 0;
    EXPECT_EQ(nonzero, static_cast<int64_t>(expect.size()));
    for (const auto& [t, v] : expect) EXPECT_EQ(c[slots[s] * vocab + t], v) << t;
  }
}

// Empirical distribution of top-k + top-p + temperature over many seeds vs the exact filtered
// distribution (computed here in double): total variation below a bound set by the sample size.
TEST(SamplerOpCpu, EmpiricalDistributionMatchesFilteredProbabilities) {
  const int64_t vocab = 64;
  std::vector<float> row(vocab);
  for (int64_t i = 0; i < vocab; ++i) row[i] = static_cast<float>(std::sin(i * 1.7) * 2.5);
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 12;
  p.top_p = 0.85f;
  // Expected: top-12 logits, then the smallest prefix (desc) with mass >= 0.85 of their mass.
  double kept = 0.0;
  const std::vector<double> w = top_k_top_p_weights(row, 0.8, 12, 0.85, &kept);
  const int32_t batch = 64, n_batches = 400;
  Sampler dev(vocab, batch, Device::cpu());
  const std::vector<int64_t> hist = draw_histogram(dev, row, p, batch, n_batches, 12345);
  const double tv = total_variation(hist, w, kept, static_cast<double>(batch) * n_batches);
  EXPECT_LT(tv, 0.02);  // expected ~ sqrt(k / n) / 2 ~ 0.006
}

// Sampler::launch's next_ids: every row's token also lands there (the next decode step's input
// ids in the engine), the rows past the batch untouched; a short or mistyped next_ids is refused.
TEST(SamplerOpCpu, NextIdsGetEachRowsToken) {
  const int64_t vocab = 500;
  Sampler dev(vocab, 8, Device::cpu());
  SamplingParams greedy, sampled;
  greedy.temperature = 0.0f;
  sampled.top_k = 20;
  std::vector<SamplerRow> rows;
  for (int32_t r = 0; r < 6; ++r)
    rows.push_back({r % 2 ? &sampled : &greedy, nullptr, nullptr, 3, 1, static_cast<uint64_t>(r)});
  Tensor logits = sampling_logits(6, vocab, 5);
  Tensor next = Tensor::from_vector(std::vector<int32_t>(8, -1));
  std::vector<SampleResult> out;
  dev.stage(rows);
  dev.launch(logits, Tensor(), &next);
  dev.finish(out);
  std::vector<int32_t> ids = next.to_vector<int32_t>();
  for (int32_t r = 0; r < 6; ++r) EXPECT_EQ(ids[r], out[r].token) << r;
  EXPECT_EQ(ids[6], -1);
  EXPECT_EQ(ids[7], -1);
  Tensor short_ids = Tensor::zeros({5}, DType::kI32), f32_ids = Tensor::zeros({8}, DType::kF32);
  dev.stage(rows);
  EXPECT_THROW(dev.launch(logits, Tensor(), &short_ids), InvalidArgument);
  EXPECT_THROW(dev.launch(logits, Tensor(), &f32_ids), InvalidArgument);
}

TEST(SamplerOpCpu, RejectsBadInput) {
  const int64_t vocab = 100;
  Sampler dev(vocab, 4, Device::cpu(), 4);
  SamplingParams p, pen;
  pen.presence_penalty = 1.0f;
  std::vector<SampleResult> out;
  Tensor logits = sampling_logits(2, vocab, 1);
  std::vector<SamplerRow> two(2, SamplerRow{&p, nullptr, nullptr, 0, 0});
  std::vector<SamplerRow> five(5, SamplerRow{&p, nullptr, nullptr, 0, 0});
  EXPECT_THROW(dev.stage(five), InvalidArgument);
  EXPECT_THROW(dev.sample(sampling_logits(3, vocab, 1), two, out), InvalidArgument);
  EXPECT_THROW(dev.sample(sampling_logits(2, vocab + 1, 1), two, out), InvalidArgument);
  std::vector<SamplerRow> null_params(1, SamplerRow{nullptr, nullptr, nullptr, 0, 0});
  EXPECT_THROW(dev.stage(null_params), InvalidArgument);
  SamplingParams bad_bias;
  bad_bias.logit_bias = {{static_cast<int32_t>(vocab), 1.0f}};
  std::vector<SamplerRow> bias_rows(1, SamplerRow{&bad_bias, nullptr, nullptr, 0, 0});
  EXPECT_THROW(dev.stage(bias_rows), InvalidArgument);
  std::vector<int32_t> bad_prompt{5, static_cast<int32_t>(vocab)};
  std::vector<SamplerRow> pen_rows(1, SamplerRow{&pen, &bad_prompt, nullptr, 0, 0});
  EXPECT_THROW(dev.stage(pen_rows), InvalidArgument);
  EXPECT_THROW(dev.reset_slot(4, {}), InvalidArgument);
  std::vector<SamplerRow> pen2(2, SamplerRow{&pen, nullptr, nullptr, 0, 0});
  std::vector<int32_t> no_slot{-1, 0}, dup{1, 1}, ok{2, 3};
  EXPECT_THROW(dev.stage(pen2, &no_slot), InvalidArgument);
  EXPECT_THROW(dev.stage(pen2, &dup), InvalidArgument);
  EXPECT_THROW(dev.launch(logits), InvalidArgument);  // nothing staged after failed stages
  dev.stage(pen2, &ok);
  dev.launch(logits);
  dev.finish(out);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_THROW(dev.finish(out), InvalidArgument);  // finish twice
  EXPECT_THROW(Sampler(0, 4, Device::cpu()), InvalidArgument);
}

}  // namespace
}  // namespace vela
