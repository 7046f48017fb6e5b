// Shared pieces of the Sampler tests (CPU in tests/engine, CUDA in tests/cuda): the filter
// configurations, realistic random logits (a heavy head over a Gaussian body), a plain loop-based
// ReferenceSampler written from the op's contract (ops/sampling.h: std::exp, full sorts, serial
// fixed-point sums, penalties from the histories), an agreement run that counts rows with the
// same token, and the empirical check of a filtered distribution (exact top-k / top-p weights, a
// histogram of many seeded draws, their total variation).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "engine/runtime/sampler.h"
#include "ops/sampling.h"

namespace vela::test {

struct SamplingConfig {
  std::string name;
  SamplingParams params;
};

inline std::vector<SamplingConfig> sampling_configs(int64_t vocab) {
  std::vector<SamplingConfig> c;
  auto add = [&](const std::string& name, auto&& set) {
    SamplingParams p;
    set(p);
    c.push_back({name, p});
  };
  add("greedy", [](SamplingParams& p) { p.temperature = 0.0f; });
  add("temperature", [](SamplingParams& p) { p.temperature = 0.7f; });
  add("top_k", [](SamplingParams& p) { p.top_k = 40; });
  add("top_k_large", [](SamplingParams& p) { p.top_k = 2000; });
  add("top_p", [](SamplingParams& p) { p.top_p = 0.9f; });
  add("top_p_hot", [](SamplingParams& p) {
    p.temperature = 1.5f;
    p.top_p = 0.98f;
  });
  add("min_p", [](SamplingParams& p) { p.min_p = 0.05f; });
  add("combo", [](SamplingParams& p) {
    p.temperature = 0.8f;
    p.top_k = 100;
    p.top_p = 0.95f;
    p.min_p = 0.02f;
  });
  add("penalties", [](SamplingParams& p) {
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.3f;
  });
  add("penalties_greedy", [](SamplingParams& p) {
    p.temperature = 0.0f;
    p.repetition_penalty = 1.2f;
    p.frequency_penalty = 0.4f;
  });
  add("bias", [&](SamplingParams& p) {
    p.logit_bias = {{1, 4.0f},
                    {static_cast<int32_t>(vocab / 2), 2.5f},
                    {static_cast<int32_t>(vocab - 1), -std::numeric_limits<float>::infinity()},
                    {7, -3.0f}};
  });
  add("everything", [&](SamplingParams& p) {
    p.temperature = 0.9f;
    p.top_k = 200;
    p.top_p = 0.9f;
    p.min_p = 0.01f;
    p.repetition_penalty = 1.1f;
    p.frequency_penalty = 0.2f;
    p.presence_penalty = 0.1f;
    p.logit_bias = {{3, 1.5f}, {static_cast<int32_t>(vocab / 3), -2.0f}};
    p.logprobs = true;
    p.top_logprobs = 5;
  });
  return c;
}

// [n_rows, vocab] f32: a Gaussian body (sd `body_sd`) plus, per row, a head of 8 tokens raised by
// up to `peak`, and every 7th row made flat (body sd * 0.15): confident and uncertain positions.
// With the defaults most of the mass is in the body (large top-p sets); peak 16 / sd 1 looks more
// like a language model's next-token distribution (the head holds most of the mass).
inline Tensor sampling_logits(int64_t n_rows, int64_t vocab, uint64_t seed, float peak = 8.0f,
                              float body_sd = 2.0f) {
  Tensor t = Tensor::empty({n_rows, vocab}, DType::kF32);
  float* x = t.data<float>();
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> body(0.0f, body_sd);
  std::uniform_int_distribution<int64_t> tok(0, vocab - 1);
  std::uniform_real_distribution<float> lift(0.0f, peak);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x + r * vocab;
    const float sd = r % 7 == 3 ? 0.15f : 1.0f;
    for (int64_t i = 0; i < vocab; ++i) row[i] = sd * body(gen);
    for (int j = 0; j < 8; ++j) row[tok(gen)] += lift(gen);
  }
  return t;
}

// Per-row histories for the penalty configs.
inline std::vector<std::vector<int32_t>> random_histories(int64_t n, int64_t vocab, size_t len,
                                                          uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> tok(0, std::min<int64_t>(vocab, 512) - 1);
  std::vector<std::vector<int32_t>> h(static_cast<size_t>(n));
  for (auto& v : h)
    for (size_t i = 0; i < len; ++i) v.push_back(static_cast<int32_t>(tok(gen)));
  return h;
}

// The op's contract written plainly (no vectorisation, no selection tricks): per row, NaN -> -inf,
// raw or tempered logprobs in double, penalties from the row's prompt / output, the bias, then
// greedy argmax or float weights exp(l * s - m * s) summed as 2^-40 fixed point, top-k by a full
// sort, top-p over all candidates sorted by (logit desc, id asc), min-p, and the draw in id order.
// Same API as Sampler::sample on CPU tensors.
class ReferenceSampler {
 public:
  explicit ReferenceSampler(int64_t vocab) : vocab_(vocab) {}

  void sample(const Tensor& logits, const std::vector<SamplerRow>& rows,
              std::vector<SampleResult>& out) {
    const int64_t n = vocab_;
    out.assign(rows.size(), SampleResult{});
    const float* base = logits.data<float>();
    for (size_t r = 0; r < rows.size(); ++r)
      out[r] = sample_row(base + static_cast<int64_t>(r) * logits.stride(0), n, rows[r]);
  }

 private:
  static SampleResult sample_row(const float* in, int64_t n, const SamplerRow& row) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    const SamplingParams& p = *row.params;
    std::vector<float> raw(in, in + n);
    for (float& v : raw)
      if (v != v) v = kNegInf;
    SampleResult res;
    const bool tempered = p.logprobs && p.logprobs_mode == LogprobsMode::kTempered;
    const float lp_scale = tempered && !p.is_greedy() ? 1.0f / p.temperature : 1.0f;
    float lp_max = kNegInf, lp_log_sum = 0.0f;
    auto logprobs = [&](const std::vector<float>& x) {
      for (float v : x) lp_max = std::max(lp_max, v * lp_scale);
      double sum = 0.0;
      for (float v : x) sum += std::exp(static_cast<double>(v * lp_scale - lp_max));
      lp_log_sum = static_cast<float>(std::log(sum));
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
      std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
      const int64_t k = std::min<int64_t>(std::min(p.top_logprobs, 20), n);
      res.top_logprobs.clear();
      for (int64_t j = 0; j < k; ++j)
        res.top_logprobs.emplace_back(
            ids[static_cast<size_t>(j)],
            (x[ids[static_cast<size_t>(j)]] * lp_scale - lp_max) - lp_log_sum);
    };
    if (p.logprobs && !tempered) logprobs(raw);

    std::vector<float> l = raw;
    if (p.has_penalties()) {
      std::vector<int32_t> c(static_cast<size_t>(n), 0);
      if (row.prompt)
        for (int32_t t : *row.prompt) c[static_cast<size_t>(t)] |= 1;
      if (row.output)
        for (int32_t t : *row.output) c[static_cast<size_t>(t)] += 2;
      for (int64_t i = 0; i < n; ++i) {
        const int32_t ci = c[static_cast<size_t>(i)];
        float v = l[i];
        if (p.repetition_penalty != 1.0f && ci != 0)
          v = v > 0.0f ? v / p.repetition_penalty : v * p.repetition_penalty;
        if ((ci >> 1) > 0) {
          const float f = p.frequency_penalty * static_cast<float>(ci >> 1);
          v -= f;
          v -= p.presence_penalty;
        }
        l[i] = v;
      }
    }
    for (const auto& [id, b] : p.logit_bias) l[static_cast<size_t>(id)] += b;
    for (float& v : l)
      if (v != v) v = kNegInf;
    if (tempered) logprobs(l);
    const std::vector<float>& lp_row = tempered ? l : raw;

    int32_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (l[i] > l[best]) best = static_cast<int32_t>(i);
    const float m = l[best];
    int32_t token = best;
    if (!p.is_greedy() && m != kNegInf) {
      const float sc = 1.0f / p.temperature, ms = m * sc;
      auto weight = [&](float v) {
        if (v == kNegInf) return 0.0f;
        const float e = v * sc;
        return std::exp(e - ms);
      };
      std::vector<uint64_t> fx(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) fx[i] = ops::sample_fixed(weight(l[i]));
      std::vector<bool> keep(static_cast<size_t>(n), true);
      if (p.top_k > 0 && p.top_k < n) {
        std::vector<float> sorted = l;
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        const float kth = sorted[static_cast<size_t>(p.top_k) - 1];
        for (int64_t i = 0; i < n; ++i) keep[i] = l[i] >= kth;
      }
      if (p.top_p < 1.0f) {
        std::vector<int32_t> order;
        uint64_t mass = 0;
        for (int32_t i = 0; i < n; ++i)
          if (keep[i] && weight(l[i]) > 0.0f) {
            order.push_back(i);
            mass += fx[i];
          }
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return l[a] > l[b]; });
        const auto target =
            static_cast<uint64_t>(static_cast<double>(p.top_p) * static_cast<double>(mass));
        uint64_t acc = 0;
        size_t j = 0;
        for (; j < order.size(); ++j) {
          acc += fx[order[j]];
          if (acc >= target) break;
        }
        for (size_t q = j + 1; q < order.size(); ++q) keep[order[q]] = false;
      }
      for (int64_t i = 0; i < n; ++i)
        if (weight(l[i]) < p.min_p && l[i] != m) keep[i] = false;
      uint64_t mass = 0;
      for (int64_t i = 0; i < n; ++i) mass += keep[i] ? fx[i] : 0;
      const float u = philox_uniform(row.seed, row.stream, row.step);
      const auto target = static_cast<uint64_t>(static_cast<double>(u) * static_cast<double>(mass));
      uint64_t cum = 0;
      for (int64_t i = 0; i < n; ++i) {
        cum += keep[i] ? fx[i] : 0;
        if (cum > target) {
          token = static_cast<int32_t>(i);
          break;
        }
      }
    }
    res.token = token;
    if (p.logprobs)
      res.logprob = (lp_row[token] * lp_scale - lp_max) - lp_log_sum;
    else
      res.top_logprobs.clear();
    return res;
  }

  int64_t vocab_;
};

struct Agreement {
  int64_t rows = 0;
  int64_t same = 0;
  int64_t max_logprob_err_ppm = 0;
  double rate() const { return rows ? static_cast<double>(same) / static_cast<double>(rows) : 1.0; }
};

// Samples `logits` (CPU, [n_rows, vocab]) with `params` on every row through both samplers, in
// batches of `dev`'s max_rows, with per-row seeds and steps; counts equal tokens and checks
// logprobs (within 1e-5) where asked.
// `Ref` is another Sampler (e.g. on the CPU) or the ReferenceSampler.
template <typename Ref>
Agreement agree(Sampler& dev, Ref& cpu, const Tensor& logits, const SamplingParams& params,
                uint64_t seed) {
  const int64_t n_rows = logits.size(0), vocab = logits.size(1);
  const auto prompts = random_histories(n_rows, vocab, 24, seed ^ 0x51);
  const auto outputs = random_histories(n_rows, vocab, 12, seed ^ 0xa7);
  Agreement a;
  const int64_t batch = dev.max_rows();
  std::vector<SampleResult> want, got;
  for (int64_t r0 = 0; r0 < n_rows; r0 += batch) {
    const int64_t r1 = std::min(n_rows, r0 + batch);
    std::vector<SamplerRow> rows;
    for (int64_t r = r0; r < r1; ++r)
      rows.push_back({&params, &prompts[static_cast<size_t>(r)], &outputs[static_cast<size_t>(r)],
                      seed * 1000003u + static_cast<uint64_t>(r), static_cast<uint64_t>(r % 97),
                      static_cast<uint64_t>(r % 3)});
    Tensor slice = logits.slice(0, r0, r1).contiguous();
    Tensor on_dev = slice.to(dev.device());
    dev.sample(on_dev, rows, got);
    Tensor cpu_copy = slice.clone();
    cpu.sample(cpu_copy, rows, want);
    for (size_t i = 0; i < rows.size(); ++i) {
      ++a.rows;
      if (got[i].token == want[i].token) ++a.same;
      if (params.logprobs) {
        // Both report raw logprobs of their own token; compare at the CPU token when they agree.
        if (got[i].token == want[i].token) {
          const double err = std::fabs(got[i].logprob - want[i].logprob);
          a.max_logprob_err_ppm = std::max(a.max_logprob_err_ppm, static_cast<int64_t>(err * 1e6));
        }
        EXPECT_EQ(got[i].top_logprobs.size(), want[i].top_logprobs.size());
        for (size_t j = 0; j < std::min(got[i].top_logprobs.size(), want[i].top_logprobs.size());
             ++j) {
          EXPECT_EQ(got[i].top_logprobs[j].first, want[i].top_logprobs[j].first) << "row " << i;
          EXPECT_NEAR(got[i].top_logprobs[j].second, want[i].top_logprobs[j].second, 1e-5);
        }
      }
    }
  }
  return a;
}

// LogprobsMode::kTempered's reference in double: log_softmax((row + penalties + bias) / T) (T = 1
// when greedy), no truncation; penalties as the Sampler applies them (repetition over prompt +
// output, then frequency / presence over output, then the bias).
inline std::vector<double> tempered_logprobs(const float* row, int64_t vocab,
                                             const SamplingParams& p,
                                             const std::vector<int32_t>& prompt,
                                             const std::vector<int32_t>& output) {
  std::vector<double> l(row, row + vocab);
  std::vector<int> count(static_cast<size_t>(vocab), 0), seen(static_cast<size_t>(vocab), 0);
  for (int32_t t : prompt) seen[static_cast<size_t>(t)] = 1;
  for (int32_t t : output) {
    seen[static_cast<size_t>(t)] = 1;
    ++count[static_cast<size_t>(t)];
  }
  for (int64_t i = 0; i < vocab; ++i) {
    auto& v = l[static_cast<size_t>(i)];
    auto f = static_cast<float>(v);
    if (p.repetition_penalty != 1.0f && seen[static_cast<size_t>(i)])
      f = f > 0.0f ? f / p.repetition_penalty : f * p.repetition_penalty;
    if (count[static_cast<size_t>(i)] > 0) {
      f -= p.frequency_penalty * static_cast<float>(count[static_cast<size_t>(i)]);
      f -= p.presence_penalty;
    }
    v = f;
  }
  for (const auto& [id, b] : p.logit_bias) l[static_cast<size_t>(id)] += b;
  const double inv_t = p.is_greedy() ? 1.0 : 1.0 / p.temperature;
  double m = -INFINITY;
  for (double v : l) m = std::max(m, v * inv_t);
  double sum = 0.0;
  for (double v : l) sum += std::exp(v * inv_t - m);
  for (double& v : l) v = v * inv_t - m - std::log(sum);
  return l;
}

// The exact distribution of temperature T, then top-k, then top-p over one row of logits (ties to
// the lower id), in double: the kept tokens' weights exp((l - max) / T), 0 elsewhere; *kept is
// their sum.
inline std::vector<double> top_k_top_p_weights(const std::vector<float>& row, double T, int top_k,
                                               double top_p, double* kept) {
  const int64_t vocab = static_cast<int64_t>(row.size());
  std::vector<int32_t> order(vocab);
  for (int32_t i = 0; i < vocab; ++i) order[i] = i;
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  const double m = row[order[0]];
  std::vector<double> w(vocab, 0.0);
  double mass = 0.0, acc = 0.0;
  for (int j = 0; j < top_k; ++j) mass += std::exp((row[order[j]] - m) / T);
  for (int j = 0; j < top_k; ++j) {
    w[order[j]] = std::exp((row[order[j]] - m) / T);
    acc += w[order[j]];
    if (acc >= top_p * mass) break;
  }
  *kept = 0.0;
  for (double x : w) *kept += x;
  return w;
}

// The tokens `dev` draws with `p` from n_batches batches of `batch` copies of `row` (one seed, the
// draw's index as its Philox stream), counted per token.
inline std::vector<int64_t> draw_histogram(Sampler& dev, const std::vector<float>& row,
                                           const SamplingParams& p, int32_t batch,
                                           int32_t n_batches, uint64_t seed) {
  const int64_t vocab = static_cast<int64_t>(row.size());
  std::vector<float> flat;
  for (int32_t r = 0; r < batch; ++r) flat.insert(flat.end(), row.begin(), row.end());
  Tensor logits = Tensor::from_vector(flat, {batch, vocab}).to(dev.device());
  std::vector<int64_t> hist(vocab, 0);
  std::vector<SampleResult> out;
  for (int32_t b = 0; b < n_batches; ++b) {
    std::vector<SamplerRow> rows;
    for (int32_t r = 0; r < batch; ++r)
      rows.push_back({&p, nullptr, nullptr, seed, static_cast<uint64_t>(b * batch + r)});
    dev.sample(logits, rows, out);
    for (const auto& res : out) ++hist[res.token];
  }
  return hist;
}

// Total variation between the histogram of n_draws draws and the distribution w / kept, printed;
// a token drawn where w is 0 (filtered out) fails the test.
inline double total_variation(const std::vector<int64_t>& hist, const std::vector<double>& w,
                              double kept, double n_draws) {
  double tv = 0.0;
  for (size_t i = 0; i < hist.size(); ++i) {
    if (w[i] == 0.0) {
      EXPECT_EQ(hist[i], 0) << "token " << i << " was filtered out";
    }
    tv += std::fabs(hist[i] / n_draws - w[i] / kept);
  }
  tv *= 0.5;
  std::printf("  total variation %.5f over %.0f draws\n", tv, n_draws);
  return tv;
}

}  // namespace vela::test
