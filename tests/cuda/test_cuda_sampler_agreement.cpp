// One sampler, two devices: the engine's Sampler on the CPU and on CUDA, fed the same logits, the
// same seeds and the same params, returns the same tokens and logprobs. Batches look like engine
// steps: every filter configuration mixed in one batch, structured-output masks
// (ops::apply_token_bitmask) on some rows, raw and tempered logprobs, penalties from histories and
// from the count table, and speculative verify rows (one request's consecutive Philox steps with
// output + drafts as their penalty context). Tokens may differ only where exp rounding moves a
// CDF boundary (at most one row in 1000 per configuration); greedy rows, the processed logits
// (penalties and bias) and the logprobs of equal tokens must match.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "engine/runtime/sampler.h"
#include "engine/sampler_test_util.h"
#include "ops/token_bitmask.h"

namespace vela {
namespace {

using test::sampling_configs;
using test::sampling_logits;

class CudaSamplerAgreementTest : public test::CudaTest {};

struct Totals {
  int64_t rows = 0, same = 0, greedy_rows = 0, greedy_same = 0;
  double worst_logprob = 0.0, worst_prob = 0.0;
};

// Samples `rows` over `logits` (CPU) on both devices and accumulates the comparison; per config
// index (rows[i] uses configs[cfg_of[i]]) at most max(1, n / 1000) differing tokens.
void compare(Sampler& cpu, Sampler& gpu_sampler, const Tensor& logits,
             const std::vector<SamplerRow>& rows, Totals& t, const char* what) {
  std::vector<SampleResult> a, b;
  Tensor host = logits.clone();
  cpu.sample(host, rows, a);
  gpu_sampler.sample(logits.to(gpu_sampler.device()), rows, b);
  // Penalties and bias are the same float operations on both devices: bit-equal rows.
  Tensor proc_gpu = gpu_sampler.processed_logits().to(Device::cpu());
  const Tensor& proc_cpu = cpu.processed_logits();
  const int64_t vocab = logits.size(1);
  for (size_t r = 0; r < rows.size(); ++r) {
    const SamplingParams& p = *rows[r].params;
    if (rows[r].want_probs) {  // the distributions drawn from
      const float* x = proc_cpu.data<float>() + static_cast<int64_t>(r) * vocab;
      const float* y = proc_gpu.data<float>() + static_cast<int64_t>(r) * vocab;
      double worst = 0.0;
      for (int64_t i = 0; i < vocab; ++i) worst = std::max<double>(worst, std::fabs(x[i] - y[i]));
      t.worst_prob = std::max(t.worst_prob, worst);
      if (a[r].token == b[r].token) {
        EXPECT_LE(worst, 1e-6) << what << " row " << r << ": distributions differ";
      }
    } else if (p.has_penalties() || !p.logit_bias.empty()) {
      const float* x = proc_cpu.data<float>() + static_cast<int64_t>(r) * vocab;
      const float* y = proc_gpu.data<float>() + static_cast<int64_t>(r) * vocab;
      int64_t n_diff = 0;
      for (int64_t i = 0; i < vocab; ++i)
        n_diff += !(x[i] == y[i] || (x[i] != x[i] && y[i] != y[i]));
      EXPECT_EQ(n_diff, 0) << what << " row " << r << ": processed logits differ";
    }
    ++t.rows;
    const bool same = a[r].token == b[r].token;
    t.same += same;
    if (p.is_greedy()) {
      ++t.greedy_rows;
      t.greedy_same += same;
      EXPECT_TRUE(same) << what << " greedy row " << r << ": cpu " << a[r].token << " cuda "
                        << b[r].token;
    }
    if (!p.logprobs) continue;
    if (same) {
      t.worst_logprob = std::max<double>(t.worst_logprob, std::fabs(a[r].logprob - b[r].logprob));
      EXPECT_NEAR(a[r].logprob, b[r].logprob, 1e-5) << what << " row " << r;
    }
    ASSERT_EQ(a[r].top_logprobs.size(), b[r].top_logprobs.size()) << what << " row " << r;
    for (size_t j = 0; j < a[r].top_logprobs.size(); ++j) {
      EXPECT_EQ(a[r].top_logprobs[j].first, b[r].top_logprobs[j].first) << what << " row " << r;
      t.worst_logprob = std::max<double>(
          t.worst_logprob, std::fabs(a[r].top_logprobs[j].second - b[r].top_logprobs[j].second));
      EXPECT_NEAR(a[r].top_logprobs[j].second, b[r].top_logprobs[j].second, 1e-5);
    }
  }
}

// Engine-like batches: each row takes the next configuration (so one batch mixes all of them),
// its own seed, step and stream, a prompt and output history; a third of the rows carry a
// structured-output mask; logprobs alternate raw and tempered; every fifth row also reports the
// distribution it was drawn from.
TEST_F(CudaSamplerAgreementTest, MixedBatchesGiveTheSameTokensAndLogprobs) {
  Totals t;
  for (int64_t vocab : {32000L, 151936L}) {
    const int32_t batch = 64, n_batches = vocab > 100000 ? 8 : 24;
    std::vector<test::SamplingConfig> configs = sampling_configs(vocab);
    // Logprobs on a copy of every config, raw and tempered alternately.
    const size_t n_plain = configs.size();
    for (size_t i = 0; i < n_plain; ++i) {
      test::SamplingConfig c = configs[i];
      c.name += "+logprobs";
      c.params.logprobs = true;
      c.params.top_logprobs = static_cast<int32_t>(i % 6);
      c.params.logprobs_mode = i % 2 ? LogprobsMode::kTempered : LogprobsMode::kRaw;
      configs.push_back(c);
    }
    Sampler cpu(vocab, batch), dev(vocab, batch, gpu());
    const auto prompts = test::random_histories(batch, vocab, 40, 3);
    const auto outputs = test::random_histories(batch, vocab, 16, 4);
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    const int64_t words = (vocab + 31) / 32;
    for (int32_t bi = 0; bi < n_batches; ++bi) {
      Tensor logits = sampling_logits(batch, vocab, 1000 + bi + vocab, 16.0f, 1.0f);
      // Masks: rows r % 3 == 1 allow a random ~half of the vocabulary (always some token).
      std::vector<int32_t> mask_rows;
      for (int32_t r = 1; r < batch; r += 3) mask_rows.push_back(r);
      Tensor mask = Tensor::empty({static_cast<int64_t>(mask_rows.size()), words}, DType::kI32);
      for (int64_t i = 0; i < mask.numel(); ++i) {
        const uint32_t bits = rng() | (i % words == 0 ? 1u : 0u);
        std::memcpy(mask.data<int32_t>() + i, &bits, 4);
      }
      Tensor ids = Tensor::from_vector(mask_rows, {static_cast<int64_t>(mask_rows.size())});
      ops::apply_token_bitmask(logits, mask, ids);  // the same masked rows go to both devices
      std::vector<SamplerRow> rows;
      for (int32_t r = 0; r < batch; ++r) {
        const size_t c = static_cast<size_t>(bi * batch + r) % configs.size();
        rows.push_back({&configs[c].params, &prompts[static_cast<size_t>(r)],
                        &outputs[static_cast<size_t>(r)], 7000u + static_cast<uint64_t>(r),
                        static_cast<uint64_t>(bi), static_cast<uint64_t>(r % 4), r % 5 == 2});
      }
      compare(cpu, dev, logits, rows, t, "mixed");
    }
  }
  std::printf(
      "  mixed batches: %lld/%lld rows with equal tokens (greedy %lld/%lld), max logprob "
      "diff %.3g, max probability diff %.3g\n",
      static_cast<long long>(t.same), static_cast<long long>(t.rows),
      static_cast<long long>(t.greedy_same), static_cast<long long>(t.greedy_rows), t.worst_logprob,
      t.worst_prob);
  EXPECT_LE(t.rows - t.same, std::max<int64_t>(1, t.rows / 1000));
}

// Speculative verify rows: request j's 1 + k rows sample consecutive Philox steps with output +
// the drafts before each row as the penalty context (what Scheduler::queue_verify_rows stages),
// with their target distributions (want_probs), and the count-table mode over decode steps; both
// devices agree token for token.
TEST_F(CudaSamplerAgreementTest, VerifyRowsAndCountTableAgree) {
  const int64_t vocab = 50000;
  const int32_t n_req = 6, k = 4, n_rows = n_req * (k + 1);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.repetition_penalty = 1.2f;
  p.frequency_penalty = 0.3f;
  p.logprobs = true;
  p.top_logprobs = 3;
  Sampler cpu(vocab, n_rows), dev(vocab, n_rows, gpu());
  const auto prompts = test::random_histories(n_req, vocab, 64, 5);
  auto outputs = test::random_histories(n_req, vocab, 10, 6);
  const auto drafts = test::random_histories(n_req, vocab, static_cast<size_t>(k), 7);
  std::vector<std::vector<int32_t>> ctx(static_cast<size_t>(n_rows));
  std::vector<SamplerRow> rows;
  for (int32_t j = 0; j < n_req; ++j) {
    for (int32_t d = 0; d <= k; ++d) {
      auto& c = ctx[static_cast<size_t>(j * (k + 1) + d)];
      c = outputs[static_cast<size_t>(j)];
      c.insert(c.end(), drafts[static_cast<size_t>(j)].begin(),
               drafts[static_cast<size_t>(j)].begin() + d);
      rows.push_back({&p, &prompts[static_cast<size_t>(j)], &c, 11u + static_cast<uint64_t>(j),
                      outputs[static_cast<size_t>(j)].size() + static_cast<uint64_t>(d), 0,
                      /*want_probs=*/true});
    }
  }
  Totals t;
  for (int step = 0; step < 6; ++step) {
    Tensor logits = sampling_logits(n_rows, vocab, 300 + step, 16.0f, 1.0f);
    compare(cpu, dev, logits, rows, t, "verify");
  }
  // Count table: reset at "admission", then decode steps that add the sampled tokens.
  Sampler cpu_t(vocab, n_req, Device::cpu(), 8), dev_t(vocab, n_req, gpu(), 8);
  std::vector<int32_t> slots{3, 0, 7, 1, 5, 2};
  for (int32_t j = 0; j < n_req; ++j) {
    cpu_t.reset_slot(slots[static_cast<size_t>(j)], prompts[static_cast<size_t>(j)],
                     outputs[static_cast<size_t>(j)]);
    dev_t.reset_slot(slots[static_cast<size_t>(j)], prompts[static_cast<size_t>(j)],
                     outputs[static_cast<size_t>(j)]);
  }
  std::vector<SampleResult> a, b;
  for (uint64_t step = 0; step < 24; ++step) {
    Tensor logits = sampling_logits(n_req, vocab, 900 + step, 16.0f, 1.0f);
    std::vector<SamplerRow> r2;
    for (int32_t j = 0; j < n_req; ++j) r2.push_back({&p, nullptr, nullptr, 5, step});
    cpu_t.stage(r2, &slots);
    cpu_t.launch(logits);
    cpu_t.finish(a);
    dev_t.stage(r2, &slots);
    dev_t.launch(logits.to(gpu()));
    dev_t.finish(b);
    for (int32_t j = 0; j < n_req; ++j) {
      ++t.rows;
      t.same += a[static_cast<size_t>(j)].token == b[static_cast<size_t>(j)].token;
    }
  }
  EXPECT_EQ(std::memcmp(cpu_t.counts().data_ptr(), dev_t.counts().to(Device::cpu()).data_ptr(),
                        cpu_t.counts().nbytes()) == 0,
            t.same == t.rows)
      << "the count tables diverge exactly when a sampled token does";
  std::printf("  verify rows + count table: %lld/%lld equal tokens, max logprob diff %.3g\n",
              static_cast<long long>(t.same), static_cast<long long>(t.rows), t.worst_logprob);
  EXPECT_LE(t.rows - t.same, 1);
}

}  // namespace
}  // namespace vela
