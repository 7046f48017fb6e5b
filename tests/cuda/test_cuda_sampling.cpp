// CUDA sampling (ops/cuda/sampling.cu through the Sampler on a CUDA device) against the CPU: the
// same Sampler on the CPU (ops/cpu/sampling.cpp, same arithmetic: tokens identical up to exp
// rounding) and the plain ReferenceSampler over thousands of rows per filter configuration, greedy
// on tied rows, both top-k/top-p paths (shared-memory candidates and the exact fallback, by
// bisection and by radix selects), raw logprobs vs log_softmax, the incremental count table over
// decode steps, an empirical distribution check, CUDA-graph capture and replay, and a DISABLED_
// benchmark (B = 1 and 64, vocab 100k and 151936).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "core/cuda/stream.h"
#include "cuda/cuda_test_util.h"
#include "engine/runtime/sampler.h"
#include "engine/sampler_test_util.h"
#include "ops/fused_gemm.h"
#include "ops/gemm.h"
#include "ops/sampling.h"
#include "ops/softmax.h"

namespace vela {
namespace {

using test::agree;
using test::CudaTest;
using test::draw_histogram;
using test::sampling_configs;
using test::sampling_logits;
using test::top_k_top_p_weights;
using test::total_variation;

// Params with only the filters (and the temperature) of the exact-path tests set.
SamplingParams filters(int32_t top_k, float top_p, float temperature = 1.0f) {
  SamplingParams p;
  p.top_k = top_k;
  p.top_p = top_p;
  p.temperature = temperature;
  return p;
}

class CudaSamplingTest : public CudaTest {};

TEST_F(CudaSamplingTest, GreedyMatchesCpuArgmaxOnRandomAndTiedRows) {
  for (int64_t vocab : {1000L, 100003L, 151936L}) {
    const int32_t n = 64;
    Tensor logits = sampling_logits(n, vocab, 21);
    float* x = logits.data<float>();
    for (int64_t i = 0; i < vocab; ++i) x[1 * vocab + i] = 0.25f;  // all tied
    x[2 * vocab + vocab - 1] = 50.0f;
    x[2 * vocab + vocab / 2] = 50.0f;
    x[3 * vocab + 17] = std::numeric_limits<float>::quiet_NaN();
    x[3 * vocab + 18] = std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < vocab; ++i) x[4 * vocab + i] = -std::numeric_limits<float>::infinity();
    SamplingParams p;
    p.temperature = 0.0f;
    std::vector<SamplerRow> rows(n, SamplerRow{&p, nullptr, nullptr, 0, 0});
    Sampler dev(vocab, n, gpu());
    std::vector<SampleResult> out;
    dev.sample(logits.to(gpu()), rows, out);
    for (int32_t r = 0; r < n; ++r)
      EXPECT_EQ(out[r].token, argmax_lower_id(x + r * vocab, vocab))
          << "vocab " << vocab << " row " << r;
    EXPECT_EQ(out[1].token, 0);
    EXPECT_EQ(out[2].token, vocab / 2);
    EXPECT_EQ(out[3].token, 18);
    EXPECT_EQ(out[4].token, 0);
  }
}

// The argmax pre-pass (argmax_chunks_kernel: a row split over up to 64 blocks when few rows leave
// SMs idle) against one scan on the CPU: ties on either side of a chunk boundary go to the lower
// id, NaN / inf / all -inf rows, odd vocabularies (scalar loads), a biased row (scanned whole by
// its own block), and sampled rows with logprobs (the row max feeds their draw).
TEST_F(CudaSamplingTest, ArgmaxChunksAgreeWithOneScanForAnyRowCount) {
  const int64_t sms = cuda::sm_count(0);
  for (int64_t vocab : {100000L, 100003L, 151936L}) {
    for (int32_t n : {1, 2, 5, 64}) {
      // The kernel's chunk length (sampling.cu): ~2 blocks per SM, >= 4096 elements, <= 64 chunks.
      const int64_t chunks = std::min<int64_t>({(2 * sms + n - 1) / n, vocab / 4096, 64});
      if (chunks < 2) continue;  // no pre-pass for this many rows on this GPU
      const int64_t per = ((vocab + chunks - 1) / chunks + 3) / 4 * 4;
      Tensor logits = sampling_logits(std::max(n, 6), vocab, 77 + n);
      float* x = logits.data<float>();
      auto row = [&](int r) { return x + static_cast<int64_t>(r % n) * vocab; };
      row(0)[per - 1] = 40.0f;  // a tie across the first boundary: the lower id wins
      row(0)[per] = 40.0f;
      if (n > 1) {
        row(1)[2 * per % vocab] = 41.0f;
        row(1)[per + 1] = 41.0f;
      }
      if (n > 4) {
        for (int64_t i = 0; i < vocab; ++i) row(2)[i] = -std::numeric_limits<float>::infinity();
        row(3)[vocab - 1] = std::numeric_limits<float>::quiet_NaN();
        row(3)[vocab - 2] = std::numeric_limits<float>::infinity();
      }
      SamplingParams greedy, biased, sampled;
      greedy.temperature = 0.0f;
      biased.temperature = 0.0f;
      biased.logit_bias = {{5, 100.0f}};
      sampled.temperature = 0.7f;
      sampled.logprobs = true;
      std::vector<SamplerRow> rows(n, SamplerRow{&greedy, nullptr, nullptr, 0, 0});
      if (n > 4) {
        rows[4].params = &biased;
        rows[1].params = &sampled;
        rows[1].seed = 9;
      }
      Sampler dev(vocab, n, gpu()), cpu(vocab, n);
      std::vector<SampleResult> got, want;
      Tensor used = logits.slice(0, 0, n);
      dev.sample(used.to(gpu()), rows, got);
      cpu.sample(used.contiguous(), rows, want);
      for (int32_t r = 0; r < n; ++r) {
        EXPECT_EQ(got[r].token, want[r].token)
            << "vocab " << vocab << " rows " << n << " row " << r;
        if (rows[r].params == &greedy) {
          EXPECT_EQ(got[r].token, argmax_lower_id(row(r), vocab)) << "row " << r;
        }
      }
      EXPECT_EQ(got[0].token, per - 1);
      if (n == 2) {
        EXPECT_EQ(got[1].token, per + 1);
      }
      if (n > 4) {
        EXPECT_EQ(got[2].token, 0);
        EXPECT_EQ(got[3].token, vocab - 2);
        EXPECT_EQ(got[4].token, 5);
        EXPECT_NEAR(got[1].logprob, want[1].logprob, 1e-4);
      }
    }
  }
}

// Every configuration over 4096 rows of a 32k vocabulary and 256 rows of 151936: the CUDA tokens
// vs the CPU Sampler's and vs the plain reference's.
TEST_F(CudaSamplingTest, AgreesWithCpuSamplerAndReferenceOnEveryConfig) {
  struct Case {
    int64_t vocab, rows;
    float peak, body_sd;  // wide bodies take the exact path for top-p, peaked heads the fast one
  };
  int64_t total = 0, same = 0, twin_total = 0, twin_same = 0;
  for (Case c : {Case{32000, 2048, 8.0f, 2.0f}, Case{32000, 2048, 16.0f, 1.0f},
                 Case{151936, 256, 16.0f, 1.0f}}) {
    Sampler dev(c.vocab, 64, gpu());
    test::ReferenceSampler twin(c.vocab);  // the plain reference
    Sampler cpu(c.vocab, 64);              // the CPU implementation
    Tensor logits = sampling_logits(c.rows, c.vocab, 1234 + c.vocab, c.peak, c.body_sd);
    for (const auto& cfg : sampling_configs(c.vocab)) {
      test::Agreement a = agree(dev, cpu, logits, cfg.params, 91);
      // The plain reference is slow (full sorts): its first 256 rows.
      test::Agreement t =
          agree(dev, twin, logits.slice(0, 0, std::min<int64_t>(256, c.rows)), cfg.params, 91);
      std::printf("  vocab %6lld sd %.0f %-16s vs CPU %lld/%lld (%.3f%%), vs reference %lld/%lld\n",
                  static_cast<long long>(c.vocab), c.body_sd, cfg.name.c_str(),
                  static_cast<long long>(a.same), static_cast<long long>(a.rows), 100.0 * a.rate(),
                  static_cast<long long>(t.same), static_cast<long long>(t.rows));
      // Sampled rows may differ only at floating-point boundaries of the inverse CDF: at most one
      // row per 1000 (at least one; the H200 showed 1/256 on top_p_hot and bias, 2/2048 on
      // temperature); >= 99.9% over all configs together is checked below.
      const int64_t allowed = std::max<int64_t>(1, a.rows / 1000);
      EXPECT_LE(a.rows - a.same, allowed) << cfg.name;
      EXPECT_LE(t.rows - t.same, std::max<int64_t>(1, t.rows / 1000)) << cfg.name;
      if (cfg.name == "greedy" || cfg.name == "penalties_greedy") {
        EXPECT_EQ(a.same, a.rows);
      }
      EXPECT_LE(a.max_logprob_err_ppm, 10) << cfg.name;
      total += a.rows;
      same += a.same;
      twin_total += t.rows;
      twin_same += t.same;
    }
  }
  std::printf("  all configs: vs CPU %lld/%lld (%.4f%%), vs reference %lld/%lld (%.4f%%)\n",
              static_cast<long long>(same), static_cast<long long>(total), 100.0 * same / total,
              static_cast<long long>(twin_same), static_cast<long long>(twin_total),
              100.0 * twin_same / twin_total);
  EXPECT_GE(static_cast<double>(same) / total, 0.999);
  EXPECT_GE(static_cast<double>(twin_same) / twin_total, 0.999);
}

// The one-pass draw and the unrolled compaction (VELA_SAMPLE_FAST) pick the same tokens, with the
// same logprobs, as the plain walks: every configuration on peaked and wide rows, odd vocabularies
// (no 16-byte loads), and the flat rows of the exact path.
TEST_F(CudaSamplingTest, FastSelectMatchesThePlainWalks) {
  struct Reset {
    ~Reset() { ops::cuda::sample_set_fast(-1); }
  } reset;
  struct Case {
    int64_t vocab, rows;
    float peak, body_sd;
  };
  auto run = [&](const Tensor& logits, const SamplingParams& params, int fast) {
    ops::cuda::sample_set_fast(fast);
    Sampler dev(logits.size(1), 64, gpu());
    std::vector<SampleResult> out, all;
    for (int64_t r0 = 0; r0 < logits.size(0); r0 += 64) {
      const int64_t n = std::min<int64_t>(64, logits.size(0) - r0);
      std::vector<SamplerRow> rows;
      for (int64_t r = 0; r < n; ++r)
        rows.push_back({&params, nullptr, nullptr, 7, static_cast<uint64_t>(r0 + r)});
      dev.stage(rows, nullptr);
      // A strided host slice keeps its row stride on the device (rows off 16-byte alignment).
      const Tensor part = logits.slice(0, r0, r0 + n);
      Tensor on_dev = part.is_contiguous() ? part.to(gpu()) : Tensor();
      if (!on_dev.defined()) {
        const int64_t ld = part.stride(0);
        Tensor whole = Tensor::empty({n, ld}, DType::kF32);
        for (int64_t r = 0; r < n; ++r)
          std::memcpy(whole.data<float>() + r * ld + 1, part.data<float>() + r * ld,
                      static_cast<size_t>(part.size(1)) * sizeof(float));
        on_dev = whole.to(gpu()).slice(1, 1, 1 + part.size(1));
      }
      dev.launch(on_dev);
      dev.finish(out);
      all.insert(all.end(), out.begin(), out.end());
    }
    return all;
  };
  auto expect_same = [&](const Tensor& logits, const SamplingParams& params,
                         const std::string& name) {
    const std::vector<SampleResult> plain = run(logits, params, 0), fast = run(logits, params, 1);
    ASSERT_EQ(plain.size(), fast.size());
    for (size_t r = 0; r < plain.size(); ++r) {
      EXPECT_EQ(plain[r].token, fast[r].token) << name << " row " << r;
      EXPECT_EQ(plain[r].logprob, fast[r].logprob) << name << " row " << r;
    }
  };
  for (Case c :
       {Case{32000, 256, 8.0f, 2.0f}, Case{32003, 128, 16.0f, 1.0f}, Case{151936, 64, 16.0f, 1.0f},
        Case{1000, 128, 4.0f, 1.0f}, Case{4097, 128, 8.0f, 2.0f}}) {
    Tensor logits = sampling_logits(c.rows, c.vocab, 4321 + c.vocab, c.peak, c.body_sd);
    for (const auto& cfg : sampling_configs(c.vocab))
      expect_same(logits, cfg.params, cfg.name + " vocab " + std::to_string(c.vocab));
  }
  // Rows 4 bytes off 16-byte alignment (a column slice): no 16-byte loads of the raw row.
  Tensor wide = sampling_logits(64, 32001, 99, 8.0f, 2.0f).slice(1, 1, 32001);
  for (const auto& cfg : sampling_configs(32000)) expect_same(wide, cfg.params, cfg.name + " +4 B");
  // Near-flat rows on a 1/64 grid: the exact path, with long runs of equal keys at the top-p cut.
  const int64_t vocab = 100000;
  Tensor flat = Tensor::empty({64, vocab}, DType::kF32);
  std::mt19937_64 gen(6);
  std::normal_distribution<float> body(0.0f, 0.05f);
  for (int64_t i = 0; i < flat.numel(); ++i)
    flat.data<float>()[i] = std::round(body(gen) * 64.0f) / 64.0f;
  const SamplingParams flat_p = filters(0, 0.97f), big_k = filters(30000, 0.5f);
  expect_same(flat, flat_p, "flat top_p");
  expect_same(flat, big_k, "flat top_k + top_p");
}

// Near-flat rows with top_p close to 1 and a huge top_k overflow the shared-memory candidate
// set: the exact path must agree too.
TEST_F(CudaSamplingTest, LargeCandidateSetsTakeTheExactPath) {
  const int64_t vocab = 100000, n_rows = 128;
  Tensor logits = Tensor::empty({n_rows, vocab}, DType::kF32);
  std::mt19937_64 gen(5);
  std::normal_distribution<float> body(0.0f, 0.05f);
  float* x = logits.data<float>();
  for (int64_t i = 0; i < logits.numel(); ++i) x[i] = body(gen);
  for (int64_t r = 0; r < n_rows; r += 4) x[r * vocab + 10] = x[r * vocab + 11];  // a tie
  Sampler dev(vocab, 64, gpu());
  Sampler cpu(vocab, 64);
  const SamplingParams flat_p = filters(0, 0.97f), big_k = filters(30000, 1.0f),
                       both = filters(50000, 0.5f, 2.0f);
  auto check = [&](const char* rows, std::initializer_list<const SamplingParams*> params,
                   uint64_t seed) {
    for (const SamplingParams* p : params) {
      test::Agreement a = agree(dev, cpu, logits, *p, seed);
      std::printf("  %s rows top_k %d top_p %.2f: %lld/%lld agree\n", rows, p->top_k, p->top_p,
                  static_cast<long long>(a.same), static_cast<long long>(a.rows));
      EXPECT_GE(a.rate(), 0.99);
    }
  };
  check("flat", {&flat_p, &big_k, &both}, 3);
  // Rows on a 1/64 grid: a few distinct keys, each held by thousands of ids, so the k-th key and
  // the top-p cut fall inside long runs of ties and the radix passes' histograms pile every id of
  // a warp into one or two bins.
  for (int64_t i = 0; i < logits.numel(); ++i) x[i] = std::round(x[i] * 64.0f) / 64.0f;
  const SamplingParams grid_k = filters(40, 1.0f), grid_p = filters(0, 0.97f),
                       grid_kp = filters(100, 0.9f, 0.5f);
  check("grid", {&grid_k, &grid_p, &grid_kp}, 4);
}

// The exact path's radix selects (VELA_SAMPLE_RADIX) find the same keys as the bisection: same
// tokens and logprobs on every configuration over peaked rows (top_k = 40 overflows the candidate
// set there), wide rows, near-flat rows and rows on a 1/64 grid (long runs of tied keys, every id
// of a warp in one or two histogram bins), with the plain and the fast walks.
TEST_F(CudaSamplingTest, RadixSelectsFindWhatTheBisectionFinds) {
  struct Reset {
    ~Reset() {
      ops::cuda::sample_set_radix(-1);
      ops::cuda::sample_set_fast(-1);
    }
  } reset;
  // agree()'s reference: the same GPU sampler with the bisection; radix selects around it.
  struct Bisection {
    Sampler& s;
    void sample(const Tensor& logits, const std::vector<SamplerRow>& rows,
                std::vector<SampleResult>& out) {
      ops::cuda::sample_set_radix(0);
      s.sample(logits.to(s.device()), rows, out);
      ops::cuda::sample_set_radix(1);
    }
  };
  const int64_t vocab = 100000;
  Tensor flat = Tensor::empty({64, vocab}, DType::kF32),
         grid = Tensor::empty({64, vocab}, DType::kF32);
  std::mt19937_64 gen(17);
  std::normal_distribution<float> body(0.0f, 0.05f);
  for (int64_t i = 0; i < flat.numel(); ++i) {
    flat.data<float>()[i] = body(gen);
    grid.data<float>()[i] = std::round(body(gen) * 64.0f) / 64.0f;
  }
  const Tensor peaked = sampling_logits(64, vocab, 18, 16.0f, 1.0f);
  const Tensor wide = sampling_logits(64, vocab, 19);
  std::vector<test::SamplingConfig> configs = sampling_configs(vocab);
  configs.push_back({"huge_k", filters(30000, 0.97f)});
  configs.push_back({"grid_kp", filters(100, 0.9f, 0.5f)});
  int64_t rows = 0;
  for (int fast : {0, 1}) {
    ops::cuda::sample_set_fast(fast);
    Sampler radix(vocab, 64, gpu()), bisect_dev(vocab, 64, gpu());
    Bisection bisect{bisect_dev};
    for (const auto& [name, x] : {std::pair<const char*, const Tensor*>{"peaked", &peaked},
                                  {"wide", &wide},
                                  {"flat", &flat},
                                  {"grid", &grid}}) {
      for (const auto& cfg : configs) {
        ops::cuda::sample_set_radix(1);
        test::Agreement a = agree(radix, bisect, *x, cfg.params, 5);
        EXPECT_EQ(a.same, a.rows) << name << " " << cfg.name << " fast " << fast;
        EXPECT_EQ(a.max_logprob_err_ppm, 0) << name << " " << cfg.name << " fast " << fast;
        rows += a.rows;
      }
    }
  }
  std::printf("  radix selects vs bisection: %lld rows compared\n", static_cast<long long>(rows));
}

TEST_F(CudaSamplingTest, LogprobsEqualLogSoftmaxOfRawLogits) {
  const int64_t vocab = 151936;
  const int32_t n = 16;
  Tensor logits = sampling_logits(n, vocab, 8);
  Tensor ref = Tensor::empty({n, vocab}, DType::kF32);
  ops::log_softmax(logits, ref);
  const float* lp = ref.data<float>();
  SamplingParams p;
  p.logprobs = true;
  p.top_logprobs = 20;
  p.frequency_penalty = 1.0f;
  p.top_p = 0.8f;
  std::vector<int32_t> history{4, 4, 9};
  std::vector<SamplerRow> rows;
  for (int32_t r = 0; r < n; ++r)
    rows.push_back({&p, &history, &history, 7, static_cast<uint64_t>(r)});
  Sampler dev(vocab, n, gpu());
  std::vector<SampleResult> out;
  dev.sample(logits.to(gpu()), rows, out);
  double worst = 0.0;
  for (int32_t r = 0; r < n; ++r) {
    worst = std::max<double>(worst, std::fabs(out[r].logprob - lp[r * vocab + out[r].token]));
    ASSERT_EQ(out[r].top_logprobs.size(), 20u);
    for (const auto& [id, v] : out[r].top_logprobs)
      worst = std::max<double>(worst, std::fabs(v - lp[r * vocab + id]));
  }
  std::printf("  max |logprob - log_softmax| = %.3g\n", worst);
  EXPECT_LE(worst, 1e-5);
}

// LogprobsMode::kTempered on the device: log_softmax of the penalized row over T, untruncated.
TEST_F(CudaSamplingTest, TemperedLogprobsAreLogSoftmaxOfTheProcessedRowOverT) {
  const int64_t vocab = 151936;
  const int32_t n = 16;
  Tensor logits = sampling_logits(n, vocab, 9);
  std::vector<SamplingParams> ps(4);
  for (SamplingParams& p : ps) {
    p.logprobs = true;
    p.top_logprobs = 20;
    p.logprobs_mode = LogprobsMode::kTempered;
    p.frequency_penalty = 1.0f;
    p.logit_bias = {{2, 10.0f}};
  }
  ps[0].temperature = 0.7f;
  ps[1].top_p = 0.8f;
  ps[2].temperature = 1.5f;
  ps[2].top_k = 30;
  ps[3].temperature = 0.0f;
  std::vector<int32_t> history{4, 4, 9};
  std::vector<SamplerRow> rows;
  for (int32_t r = 0; r < n; ++r)
    rows.push_back(
        {&ps[static_cast<size_t>(r % 4)], &history, &history, 7, static_cast<uint64_t>(r)});
  Sampler dev(vocab, n, gpu());
  std::vector<SampleResult> out;
  dev.sample(logits.to(gpu()), rows, out);
  const float* x = logits.data<float>();
  double worst = 0.0;
  for (int32_t r = 0; r < n; ++r) {
    const std::vector<double> want =
        test::tempered_logprobs(x + static_cast<int64_t>(r) * vocab, vocab,
                                *rows[static_cast<size_t>(r)].params, history, history);
    worst = std::max(worst, std::fabs(out[r].logprob - want[static_cast<size_t>(out[r].token)]));
    ASSERT_EQ(out[r].top_logprobs.size(), 20u);
    for (const auto& [id, v] : out[r].top_logprobs)
      worst = std::max(worst, std::fabs(v - want[static_cast<size_t>(id)]));
  }
  std::printf("  max |tempered logprob - log_softmax(processed / T)| = %.3g\n", worst);
  EXPECT_LE(worst, 1e-5);
}

TEST_F(CudaSamplingTest, IncrementalCountsMatchFullHistory) {
  const int64_t vocab = 50000;
  const int32_t n_seqs = 8;
  Sampler dev(vocab, n_seqs, gpu(), 16);
  Sampler cpu(vocab, n_seqs);
  SamplingParams p;
  p.repetition_penalty = 1.3f;
  p.frequency_penalty = 0.8f;
  p.presence_penalty = 0.5f;
  p.top_k = 50;
  auto prompts = test::random_histories(n_seqs, vocab, 200, 4);
  std::vector<std::vector<int32_t>> outputs(n_seqs);
  std::vector<int32_t> slots{15, 2, 9, 0, 4, 11, 3, 7};
  for (int32_t s = 0; s < n_seqs; ++s) dev.reset_slot(slots[s], prompts[s]);
  std::vector<SampleResult> got, want;
  int64_t n_same = 0, n_all = 0;
  for (uint64_t step = 0; step < 64; ++step) {
    Tensor logits = sampling_logits(n_seqs, vocab, 500 + step, 3.0f);
    std::vector<SamplerRow> rows;
    for (int32_t s = 0; s < n_seqs; ++s)
      rows.push_back({&p, &prompts[s], &outputs[s], static_cast<uint64_t>(s), step});
    dev.stage(rows, &slots);
    dev.launch(logits.to(gpu()));
    dev.finish(got);
    Tensor copy = logits.clone();
    cpu.sample(copy, rows, want);
    for (int32_t s = 0; s < n_seqs; ++s) {
      n_same += got[s].token == want[s].token;
      ++n_all;
      outputs[s].push_back(got[s].token);  // both continue from the device's token
    }
  }
  EXPECT_GE(n_same, n_all - 1);
  std::vector<int32_t> c = dev.counts().to(Device::cpu()).to_vector<int32_t>();
  for (int32_t s = 0; s < n_seqs; ++s) {
    std::vector<int32_t> expect(vocab, 0);
    for (int32_t t : prompts[s]) expect[t] |= 1;
    for (int32_t t : outputs[s]) expect[t] += 2;
    for (int64_t i = 0; i < vocab; ++i)
      ASSERT_EQ(c[slots[s] * vocab + i], expect[i]) << "slot " << slots[s] << " token " << i;
  }
}

TEST_F(CudaSamplingTest, EmpiricalDistributionOfTopKTopP) {
  const int64_t vocab = 32000;
  const int32_t batch = 64, n_batches = 160;
  std::vector<float> row(vocab);
  for (int64_t i = 0; i < vocab; ++i) row[i] = -4.0f - static_cast<float>(i % 1000) * 1e-3f;
  for (int i = 0; i < 24; ++i) row[i * 997 % vocab] = static_cast<float>(std::cos(i * 0.9) * 1.5);
  SamplingParams p;
  p.temperature = 1.2f;
  p.top_k = 16;
  p.top_p = 0.8f;
  // The exact filtered distribution from the CPU Sampler's own arithmetic: its probabilities are
  // not exposed, so recompute in double with the same rule.
  double kept = 0.0;
  const std::vector<double> w = top_k_top_p_weights(row, 1.2, 16, 0.8, &kept);
  Sampler dev(vocab, batch, gpu());
  const std::vector<int64_t> hist = draw_histogram(dev, row, p, batch, n_batches, 99);
  const double tv = total_variation(hist, w, kept, static_cast<double>(batch) * n_batches);
  EXPECT_LT(tv, 0.02);
}

// The engine's overlapped pattern: stage, launch and download of step k + 1 enqueued before step
// k is collected, so the params upload and the read-back (side streams, VELA_SIDE_COPIES) run
// while another launch is in flight. Every step's tokens equal a CPU sampler's on the same
// logits, and each launch's next_ids hold its tokens (the next step's input ids in the engine).
TEST_F(CudaSamplingTest, OverlappedStepsKeepTheirParamsAndTokens) {
  const int64_t vocab = 151936;
  const int32_t n = 64, steps = 12;
  std::vector<Tensor> host_logits, dev_logits;
  for (int32_t k = 0; k < steps; ++k) {
    host_logits.push_back(sampling_logits(n, vocab, 100 + k));
    dev_logits.push_back(host_logits.back().to(gpu()));
  }
  SamplingParams greedy, top;
  greedy.temperature = 0.0f;
  top.top_k = 40;
  top.temperature = 0.8f;
  auto rows_at = [&](int32_t k) {  // each step flips which rows are greedy: params must not mix
    std::vector<SamplerRow> rows;
    for (int32_t r = 0; r < n; ++r)
      rows.push_back({(r + k) % 3 ? &top : &greedy, nullptr, nullptr, 9, static_cast<uint64_t>(k),
                      static_cast<uint64_t>(r)});
    return rows;
  };
  Sampler dev(vocab, n, gpu()), cpu(vocab, n, Device::cpu());
  Tensor next = Tensor::zeros({n}, DType::kI32, gpu());
  std::vector<SampleResult> got, want;
  int prev = -1;
  for (int32_t k = 0; k <= steps; ++k) {
    int cur = -1;
    if (k < steps) {
      dev.stage(rows_at(k));
      dev.launch(dev_logits[static_cast<size_t>(k)], Tensor(), &next);
      cur = dev.download();
    }
    if (prev >= 0) {  // step k - 1, collected after step k was enqueued
      dev.collect(prev, got);
      cpu.sample(host_logits[static_cast<size_t>(k - 1)], rows_at(k - 1), want);
      int32_t same = 0;
      for (int32_t r = 0; r < n; ++r) same += got[r].token == want[r].token;
      EXPECT_GE(same, n - 1) << "step " << k - 1;  // exp rounding at a CDF boundary at most
    }
    prev = cur;
  }
  std::vector<int32_t> last = next.to(Device::cpu()).to_vector<int32_t>();
  for (int32_t r = 0; r < n; ++r) EXPECT_EQ(last[r], got[r].token) << "next_ids row " << r;
}

// launch() captured once in a CUDA graph, replayed with freshly staged params each step, gives
// the tokens of plain launches.
TEST_F(CudaSamplingTest, GraphCaptureAndReplay) {
  const int64_t vocab = 100000;
  const int32_t n = 8;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    cuda::StreamGuard guard(stream);
    Tensor logits = sampling_logits(n, vocab, 42).to(gpu());
    Sampler dev(vocab, n, gpu()), ref(vocab, n, gpu());
    SamplingParams p;
    p.top_p = 0.9f;
    p.top_k = 64;
    p.presence_penalty = 0.5f;
    std::vector<int32_t> slots{0, 1, 2, 3, 4, 5, 6, 7};
    for (int32_t s = 0; s < n; ++s) {
      dev.reset_slot(s, {1, 2, 3});
      ref.reset_slot(s, {1, 2, 3});
    }
    auto rows_at = [&](uint64_t step) {
      std::vector<SamplerRow> rows;
      for (int32_t r = 0; r < n; ++r)
        rows.push_back({&p, nullptr, nullptr, 5, step, static_cast<uint64_t>(r)});
      return rows;
    };
    std::vector<SampleResult> a, b;
    dev.stage(rows_at(0), &slots);  // warm-up launch (sets the kernel's shared-memory limit)
    dev.launch(logits);
    dev.finish(a);
    ref.stage(rows_at(0), &slots);
    ref.launch(logits);
    ref.finish(b);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    dev.stage(rows_at(1), &slots);
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    dev.launch(logits);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (uint64_t step = 1; step < 6; ++step) {
      if (step > 1) dev.stage(rows_at(step), &slots);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      dev.finish(a);
      ref.stage(rows_at(step), &slots);
      ref.launch(logits);
      ref.finish(b);
      for (int32_t r = 0; r < n; ++r) EXPECT_EQ(a[r].token, b[r].token) << "step " << step;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
}

// Not a test: kernel time of one launch (B rows) and the full stage + launch + finish round trip.
TEST_F(CudaSamplingTest, DISABLED_Bench) {
  std::printf("%-8s %-5s %-16s %12s %14s\n", "vocab", "rows", "config", "kernel_us",
              "roundtrip_us");
  for (int64_t vocab : {100000L, 151936L}) {
    for (int32_t n : {1, 64}) {
      Tensor logits = sampling_logits(n, vocab, 77, 16.0f, 1.0f).to(gpu());
      Tensor wide = sampling_logits(n, vocab, 78).to(gpu());  // most mass in the body
      Sampler dev(vocab, n, gpu());
      std::vector<int32_t> slots(n);
      for (int32_t r = 0; r < n; ++r) {
        slots[r] = r;
        dev.reset_slot(r, {1, 2, 3, 4, 5});
      }
      std::vector<test::SamplingConfig> configs = sampling_configs(vocab);
      configs.push_back(configs[4]);  // top_p again, on the wide rows
      configs.back().name = "top_p_wide_rows";
      for (const auto& cfg : configs) {
        const Tensor& x = cfg.name == "top_p_wide_rows" ? wide : logits;
        std::vector<SamplerRow> rows;
        for (int32_t r = 0; r < n; ++r)
          rows.push_back({&cfg.params, nullptr, nullptr, 1, static_cast<uint64_t>(r)});
        std::vector<SampleResult> out;
        dev.stage(rows, &slots);
        dev.launch(x);
        dev.finish(out);
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        const int iters = 200;
        // finish() consumes the staged rows; launch() may repeat between stage() and finish()
        // (as a graph replay does), so stage once for the timed launches.
        dev.stage(rows, &slots);
        cudaEventRecord(e0, cuda::current_stream());
        for (int i = 0; i < iters; ++i) dev.launch(x);
        cudaEventRecord(e1, cuda::current_stream());
        cudaEventSynchronize(e1);
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        dev.finish(out);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) {
          for (auto& row : rows) row.step++;
          dev.stage(rows, &slots);
          dev.launch(x);
          dev.finish(out);
        }
        const double rt =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count() /
            iters;
        std::printf("%-8lld %-5d %-16s %12.2f %14.2f\n", static_cast<long long>(vocab), n,
                    cfg.name.c_str(), 1000.0 * ms / iters, rt);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
      }
    }
  }
}

// The LM head writing the sampler's argmax pieces (ops::gemm_argmax_chunks: the wgmma GEMM's
// epilogue at 3..64 rows on sm_90 when the vocabulary fills the SMs without split-K; the GEMM and
// ops::argmax_chunks elsewhere): the logits equal ops::gemm's bit for bit, every piece equals the
// CPU op's over those logits (a tie across the first chunk boundary included), and a Sampler fed
// the pieces picks each greedy row's argmax (a biased row still scans its processed row).
TEST_F(CudaSamplingTest, LmHeadArgmaxChunksMatchCpuAndFeedTheGreedyToken) {
  const int64_t k = 256;
  for (int64_t vocab : {100000L, 151936L, 5000L}) {
    Tensor w_host = test::random_cpu({vocab, k}, DType::kBF16, 31 + vocab);
    for (int32_t m : {1, 3, 16, 64, 65}) {
      Tensor a_host = test::random_cpu({m, k}, DType::kBF16, 7 + m);
      // Row 0's largest logit sits on ids 127 and 128 alike: the pieces must keep the lower id.
      for (int64_t i = 0; i < k; ++i) {
        const float s =
            static_cast<float>(static_cast<const bf16*>(a_host.data_ptr())[i]) < 0 ? -1.0f : 1.0f;
        static_cast<bf16*>(w_host.data_ptr())[127 * k + i] = bf16(s);
        static_cast<bf16*>(w_host.data_ptr())[128 * k + i] = bf16(s);
      }
      Tensor a = a_host.to(gpu()), w = w_host.to(gpu());
      const int64_t chunks = ops::argmax_chunk_count(vocab);
      Tensor logits = Tensor::zeros({m, vocab}, DType::kF32, gpu());
      Tensor plain = Tensor::zeros({m, vocab}, DType::kF32, gpu());
      Tensor pieces = Tensor::zeros({m + 1, chunks + 1}, DType::kI64, gpu());
      ops::gemm_argmax_chunks(a, w, logits, pieces);
      ops::gemm(a, w, plain, false, true);
      Tensor got_logits = logits.to(Device::cpu()), want_logits = plain.to(Device::cpu());
      ASSERT_EQ(std::memcmp(got_logits.data_ptr(), want_logits.data_ptr(), want_logits.nbytes()), 0)
          << "vocab " << vocab << " rows " << m;
      Tensor want = Tensor::zeros({m, chunks}, DType::kI64);
      ops::argmax_chunks(got_logits, want);
      Tensor got = pieces.to(Device::cpu());
      for (int32_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < chunks; ++j)
          ASSERT_EQ(static_cast<const int64_t*>(got.data_ptr())[r * got.stride(0) + j],
                    static_cast<const int64_t*>(want.data_ptr())[r * chunks + j])
              << "vocab " << vocab << " rows " << m << " row " << r << " chunk " << j;

      SamplingParams greedy, biased;
      greedy.temperature = 0.0f;
      biased.temperature = 0.0f;
      biased.logit_bias = {{5, 1000.0f}};
      std::vector<SamplerRow> rows(m, SamplerRow{&greedy, nullptr, nullptr, 0, 0});
      if (m > 2) rows[2].params = &biased;
      Sampler dev(vocab, m, gpu());
      std::vector<SampleResult> out;
      dev.stage(rows);
      dev.launch(logits, pieces);
      dev.finish(out);
      const float* x = got_logits.data<float>();
      for (int32_t r = 0; r < m; ++r)
        EXPECT_EQ(out[r].token,
                  rows[r].params == &biased ? 5 : argmax_lower_id(x + r * vocab, vocab))
            << "vocab " << vocab << " rows " << m << " row " << r;
      EXPECT_EQ(out[0].token, 127) << "vocab " << vocab << " rows " << m;
    }
  }
}

}  // namespace
}  // namespace vela
