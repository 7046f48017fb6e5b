// CPU twin of the sampling op: the same per-row pipeline as ops/cuda/sampling.cu written plainly
// (nth_element for top-k, a full sort of the candidates for top-p, serial fixed-point sums), so
// the kernel's thresholds and draw can be checked against it. Rows run in parallel; each worker
// owns its scratch (grown on first use, then reused).
#include "ops/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "core/rng.h"
#include "ops/cpu/cpu_ops.h"

namespace vela::ops::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float bits_to_float(int32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
int32_t float_to_bits(float f) {
  int32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float sanitize(float v) { return v != v ? kNegInf : v; }

// Largest value, ties to the lower id (row NaN-free). Returns -1 for an empty row.
int32_t argmax_row(const float* x, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = static_cast<int32_t>(i);
  return best;
}

struct RowScratch {
  std::vector<float> raw;      // [vocab] sanitized raw logits
  std::vector<float> sel;      // [vocab] nth_element buffer
  std::vector<uint64_t> cand;  // [vocab] top-p candidates as sample_rank
};

void sample_row(const float* in, const SampleRowParams& p, const int32_t* bias, int32_t* counts_row,
                float* proc, int64_t n, int32_t* out, int64_t out_stride, int64_t row,
                RowScratch& s) {
  s.raw.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s.raw[i] = sanitize(in[i]);
  const float* raw = s.raw.data();

  // Logprobs of the raw row, or (kSampleLogprobsTempered) of the processed one times 1/T.
  const bool want_lp = (p.flags & kSampleLogprobs) != 0;
  const bool tempered = want_lp && (p.flags & kSampleLogprobsTempered);
  const float lp_scale = tempered ? p.inv_temperature : 1.0f;
  float lp_max = kNegInf, lp_log_sum = 0.0f;
  auto logprobs = [&](const float* x) {
    for (int64_t i = 0; i < n; ++i) lp_max = std::max(lp_max, x[i] * lp_scale);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i] * lp_scale - lp_max));
    lp_log_sum = static_cast<float>(std::log(sum));
    const int32_t k = std::min<int32_t>(p.n_top_logprobs, static_cast<int32_t>(n));
    if (k > 0) {
      s.cand.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        s.cand[i] = sample_rank(sample_key(x[i]), static_cast<int32_t>(i));
      std::partial_sort(s.cand.begin(), s.cand.begin() + k, s.cand.end(), std::greater<>());
      for (int32_t j = 0; j < k; ++j) {
        const auto id = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(s.cand[j]));
        out[(kSampleOutTopIds + j) * out_stride + row] = id;
        out[(kSampleOutTopLogprobs + j) * out_stride + row] =
            float_to_bits((x[id] * lp_scale - lp_max) - lp_log_sum);
      }
    }
  };
  if (want_lp && !tempered) logprobs(raw);

  // Penalties and bias into `proc` (only rows that change).
  const float* l = raw;
  const bool penalize = (p.flags & (kSampleRepetition | kSampleFreqPresence)) != 0;
  if (penalize || p.bias_end > p.bias_begin) {
    for (int64_t i = 0; i < n; ++i) {
      float v = raw[i];
      const int32_t c = penalize ? counts_row[i] : 0;
      if ((p.flags & kSampleRepetition) && c != 0)
        v = v > 0.0f ? v / p.repetition : v * p.repetition;
      if ((p.flags & kSampleFreqPresence) && (c >> 1) > 0) {
        v -= p.frequency * static_cast<float>(c >> 1);
        v -= p.presence;
      }
      proc[i] = v;
    }
    for (int32_t b = p.bias_begin; b < p.bias_end; ++b)
      proc[bias[2 * b]] += bits_to_float(bias[2 * b + 1]);
    for (int64_t i = 0; i < n; ++i) proc[i] = sanitize(proc[i]);
    l = proc;
  }

  if (tempered) logprobs(l);
  const float* lp_row = tempered ? l : raw;

  const int32_t am = argmax_row(l, n);
  const float m = l[am];
  int32_t token = am;
  if (!(p.flags & kSampleGreedy) && m != kNegInf) {
    const float sc = p.inv_temperature, ms = m * sc;
    auto weight = [&](float v) { return v == kNegInf ? 0.0f : std::exp(v * sc - ms); };

    // Top-k: the k-th largest logit (ties kept).
    uint32_t kth_key = 0;
    if (p.top_k > 0 && p.top_k < n) {
      s.sel.assign(l, l + n);
      std::nth_element(s.sel.begin(), s.sel.begin() + (p.top_k - 1), s.sel.end(), std::greater<>());
      kth_key = sample_key(s.sel[p.top_k - 1]);
    }
    // Top-p: the first candidate in rank order whose cumulative mass reaches top_p * mass.
    uint64_t cut = 0;
    if (p.top_p < 1.0f) {
      s.cand.clear();
      uint64_t mass = 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t key = sample_key(l[i]);
        const float w = weight(l[i]);
        if (key >= kth_key && w > 0.0f) {
          s.cand.push_back(sample_rank(key, static_cast<int32_t>(i)));
          mass += sample_fixed(w);
        }
      }
      std::sort(s.cand.begin(), s.cand.end(), std::greater<>());
      const auto target =
          static_cast<uint64_t>(static_cast<double>(p.top_p) * static_cast<double>(mass));
      uint64_t acc = 0;
      for (uint64_t c : s.cand) {
        const auto id = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(c));
        acc += sample_fixed(weight(l[id]));
        if (acc >= target) {
          cut = c;
          break;
        }
      }
    }
    // Min-p and the draw in ascending id order.
    auto kept = [&](int64_t i) -> uint64_t {
      const float v = l[i];
      const uint32_t key = sample_key(v);
      if (key < kth_key || sample_rank(key, static_cast<int32_t>(i)) < cut) return 0;
      const float w = weight(v);
      if (w < p.min_p && v != m) return 0;
      return sample_fixed(w);
    };
    uint64_t mass = 0;
    for (int64_t i = 0; i < n; ++i) mass += kept(i);
    const float u = philox_uniform(p.seed, p.stream, p.step);
    const auto target = static_cast<uint64_t>(static_cast<double>(u) * static_cast<double>(mass));
    uint64_t cum = 0;
    for (int64_t i = 0; i < n; ++i) {
      cum += kept(i);
      if (cum > target) {
        token = static_cast<int32_t>(i);
        break;
      }
    }
  }
  out[kSampleOutToken * out_stride + row] = token;
  out[kSampleOutLogprob * out_stride + row] =
      want_lp ? float_to_bits((lp_row[token] * lp_scale - lp_max) - lp_log_sum) : 0;
  if (p.flags & kSampleUpdateCounts) counts_row[token] += 2;
}

}  // namespace

void sample(const Tensor& logits, const Tensor& params, const Tensor& bias, Tensor& counts,
            Tensor& work, Tensor& out) {
  const int64_t n_rows = logits.size(0), n = logits.size(1);
  const auto* rows = reinterpret_cast<const SampleRowParams*>(params.data_ptr());
  const float* base = logits.data<float>();
  const int64_t stride = logits.stride(0);
  const int32_t* b = bias.data<int32_t>();
  int32_t* c = counts.data<int32_t>();
  float* w = work.data<float>();
  int32_t* o = out.data<int32_t>();
  const int64_t out_stride = out.size(1);
  parallel_for(n_rows, 1, [&](int64_t r0, int64_t r1) {
    thread_local RowScratch scratch;
    for (int64_t r = r0; r < r1; ++r) {
      SampleRowParams p;
      std::memcpy(&p, rows + r, sizeof(p));
      int32_t* counts_row = p.slot >= 0 ? c + static_cast<int64_t>(p.slot) * n : nullptr;
      sample_row(base + r * stride, p, b, counts_row, w + r * n, n, o, out_stride, r, scratch);
    }
  });
}

void sample_reset_counts(Tensor& counts, const Tensor& resets, int32_t n_resets,
                         const Tensor& entries) {
  const int64_t n = counts.size(1);
  int32_t* c = counts.data<int32_t>();
  const int32_t* r = resets.data<int32_t>();
  const int32_t* e = entries.data<int32_t>();
  for (int32_t i = 0; i < n_resets; ++i) {
    int32_t* row = c + static_cast<int64_t>(r[3 * i]) * n;
    std::fill(row, row + n, 0);
    for (int32_t j = r[3 * i + 1]; j < r[3 * i + 2]; ++j) row[e[2 * j]] = e[2 * j + 1];
  }
}

}  // namespace vela::ops::cpu
