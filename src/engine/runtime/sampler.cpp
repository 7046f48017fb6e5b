// Sampler on the CPU: per-row penalties, bias and filtering, parallel over rows with per-worker
// scratch allocated once. Filters are thresholds over the row (top-k: the k-th largest logit;
// top-p: a cut key in (logit desc, id asc) order; min-p: a weight floor), so the final draw always
// walks the kept tokens in ascending id order: the canonical order a device twin must reproduce.
#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "ops/cpu/vec.h"

namespace vela {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Largest non-NaN value of row[0..n) (-inf when none); *has_nan reports NaNs.
float max_value(const float* row, int64_t n, bool* has_nan) {
  float m = kNegInf;
  bool any_nan = false;
#pragma omp simd reduction(max : m) reduction(| : any_nan)
  for (int64_t i = 0; i < n; ++i) {
    m = row[i] > m ? row[i] : m;
    any_nan |= row[i] != row[i];
  }
  *has_nan = any_nan;
  return m;
}

// w[i] = exp(x[i] * scale - shift), exactly 0 where x[i] == -inf (banned tokens must carry no
// mass even though exp of the clamped argument is a tiny subnormal).
void exp_weights(const float* x, float* w, int64_t n, float scale, float shift) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 vs = _mm512_set1_ps(scale), vshift = _mm512_set1_ps(shift),
               vninf = _mm512_set1_ps(kNegInf);
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __m512 e = ops::cpu::exp512(_mm512_sub_ps(_mm512_mul_ps(v, vs), vshift));
    __mmask16 finite = _mm512_cmp_ps_mask(v, vninf, _CMP_NEQ_OQ);
    _mm512_storeu_ps(w + i, _mm512_maskz_mov_ps(finite, e));
  }
#endif
  for (; i < n; ++i) {
    w[i] = x[i] == kNegInf ? 0.0f : std::exp(x[i] * scale - shift);
  }
}

// The k-th largest value of row[0..n) counting multiplicity (1 <= k <= n). A bounded min-heap
// when k is small (one compare per element), nth_element on a copy otherwise.
float kth_largest(const float* row, int64_t n, int64_t k, float* buf) {
  if (k * 16 <= n) {
    int64_t size = 0;
    for (int64_t i = 0; i < n; ++i) {
      float v = row[i];
      if (size < k) {
        buf[size++] = v;
        std::push_heap(buf, buf + size, std::greater<float>());
      } else if (v > buf[0]) {
        std::pop_heap(buf, buf + size, std::greater<float>());
        buf[size - 1] = v;
        std::push_heap(buf, buf + size, std::greater<float>());
      }
    }
    return buf[0];
  }
  std::memcpy(buf, row, static_cast<size_t>(n) * sizeof(float));
  std::nth_element(buf, buf + (k - 1), buf + n, std::greater<float>());
  return buf[k - 1];
}

// (logit desc, id asc): the order of top-p's cumulative mass and of top_logprobs.
bool before(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// The top-p cut: the first candidate in `before` order at which the cumulative weight reaches
// `target`, found by a weighted quickselect (expected linear time; no full sort of what may be
// most of the vocabulary). Keys are unique (ids are), so each round splits the range into the keys
// before a pivot, the pivot, and the keys after it, and keeps the part where the target falls.
// Pivots are medians of three positions from a fixed-seed LCG: deterministic, and no input order
// can make it quadratic in expectation; after 64 rounds the rest is simply sorted. Returns false
// when the target is never reached (rounding with top_p close to 1): keep everything.
bool find_top_p_cut(std::pair<float, int32_t>* cand, int64_t n, const float* w, double target,
                    std::pair<float, int32_t>* cut) {
  int64_t lo = 0, hi = n;
  double acc = 0.0;  // weight of the candidates known to come before [lo, hi)
  uint64_t state = 0x853C49E6748FEA9Bull;
  auto pick = [&]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return cand[lo + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(hi - lo))];
  };
  for (int round = 0; hi - lo > 32 && round < 64; ++round) {
    std::pair<float, int32_t> a = pick(), b = pick(), c = pick();
    if (before(b, a)) std::swap(a, b);
    if (before(c, b)) std::swap(b, c);
    if (before(b, a)) std::swap(a, b);
    const std::pair<float, int32_t> pivot = b;
    auto* mid =
        std::partition(cand + lo, cand + hi, [&](const auto& x) { return before(x, pivot); });
    double mass_before = 0.0;
    for (auto* q = cand + lo; q < mid; ++q) mass_before += w[q->second];
    if (acc + mass_before >= target) {
      hi = mid - cand;
      continue;
    }
    acc += mass_before;
    std::iter_swap(mid, std::find(mid, cand + hi, pivot));  // the pivot right after its prefix
    acc += w[pivot.second];
    if (acc >= target) {
      *cut = pivot;
      return true;
    }
    lo = (mid - cand) + 1;
  }
  std::sort(cand + lo, cand + hi, before);
  for (int64_t j = lo; j < hi; ++j) {
    acc += w[cand[j].second];
    if (acc >= target) {
      *cut = cand[j];
      return true;
    }
  }
  return false;
}

void check_tokens(const std::vector<int32_t>* tokens, int64_t vocab_size, const char* what) {
  if (tokens == nullptr) return;
  for (int32_t t : *tokens)
    VELA_CHECK(t >= 0 && t < vocab_size, "Sampler: ", what, " token id ", t,
               " is outside the vocabulary [0, ", vocab_size, ")");
}

}  // namespace

int32_t argmax_lower_id(const float* row, int64_t n) {
  bool has_nan = false;
  float m = max_value(row, n, &has_nan);
  for (int64_t i = 0; i < n; ++i)
    if (row[i] == m) return static_cast<int32_t>(i);
  return 0;  // every value NaN
}

Sampler::Sampler(int64_t vocab_size, int32_t max_rows)
    : vocab_size_(vocab_size), max_rows_(max_rows) {
  VELA_CHECK(vocab_size > 0 && vocab_size <= std::numeric_limits<int32_t>::max(),
             "Sampler: vocab_size must be in [1, 2^31), got ", vocab_size);
  VELA_CHECK(max_rows > 0, "Sampler: max_rows must be >= 1, got ", max_rows);
  const int n_workers = std::max(1, std::min(num_threads(), max_rows));
  const auto v = static_cast<size_t>(vocab_size);
  workers_.resize(static_cast<size_t>(n_workers));
  for (Scratch& s : workers_) {
    s.raw.resize(v);
    s.prob.resize(v);
    s.heap.resize(v);
    s.sorted.resize(v);
    s.count.assign(v, 0);
    s.seen.assign(v, 0);
    s.top.reserve(SamplingParams::kMaxTopLogprobs + 1);
  }
}

void Sampler::sample(Tensor& logits, const std::vector<SamplerRow>& rows,
                     std::vector<SampleResult>& out) {
  VELA_CHECK(
      logits.defined() && logits.is_cpu() && logits.dtype() == DType::kF32 && logits.dim() == 2,
      "Sampler: logits must be f32 [n_rows, vocab] on the CPU, got ",
      logits.defined() ? logits.str() : std::string("undefined"));
  const int64_t n_rows = logits.size(0);
  VELA_CHECK(logits.size(1) == vocab_size_, "Sampler: logits ", logits.str(), " do not have ",
             vocab_size_, " columns");
  VELA_CHECK(logits.size(1) == 1 || logits.stride(1) == 1, "Sampler: logits ", logits.str(),
             " must have unit column stride");
  VELA_CHECK(static_cast<int64_t>(rows.size()) == n_rows, "Sampler: ", rows.size(),
             " rows for logits ", logits.str());
  VELA_CHECK(n_rows <= max_rows_, "Sampler: ", n_rows, " rows exceed max_rows ", max_rows_);
  for (const SamplerRow& row : rows) {
    VELA_CHECK(row.params != nullptr, "Sampler: a row has no SamplingParams");
    row.params->validate();
  }
  if (out.size() != static_cast<size_t>(n_rows)) out.resize(static_cast<size_t>(n_rows));
  if (n_rows == 0) return;

  float* base = logits.data<float>();
  const int64_t row_stride = logits.stride(0);
  const int64_t n_active = std::min<int64_t>(static_cast<int64_t>(workers_.size()), n_rows);
  parallel_for(n_active, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      Scratch& s = workers_[static_cast<size_t>(w)];
      s.error = nullptr;
      try {
        for (int64_t r = w; r < n_rows; r += n_active)
          sample_row(base + r * row_stride, rows[static_cast<size_t>(r)],
                     out[static_cast<size_t>(r)], s);
      } catch (...) {
        s.error = std::current_exception();  // never let an exception cross the OpenMP region
      }
    }
  });
  for (int64_t w = 0; w < n_active; ++w)
    if (workers_[static_cast<size_t>(w)].error)
      std::rethrow_exception(workers_[static_cast<size_t>(w)].error);
}

void Sampler::sample_row(float* logits, const SamplerRow& row, SampleResult& out,
                         Scratch& s) const {
  const SamplingParams& p = *row.params;
  const int64_t n = vocab_size_;
  out.logprob = 0.0f;
  out.top_logprobs.clear();

  bool has_nan = false;
  float raw_max = max_value(logits, n, &has_nan);
  if (has_nan) {  // a broken model row; NaN would poison every comparison and sort below
    for (int64_t i = 0; i < n; ++i)
      if (logits[i] != logits[i]) logits[i] = kNegInf;
  }

  // 1. Logprobs of the raw logits, captured before anything touches the row (kRaw); kTempered
  // takes them after the bias, from the tempered row the draw uses.
  const bool tempered = p.logprobs && p.logprobs_mode == LogprobsMode::kTempered;
  const bool modifies = p.has_penalties() || !p.logit_bias.empty();
  const float* raw = logits;
  float lp_scale = 1.0f, lp_max = raw_max, lp_log_sum = 0.0f;
  if (p.logprobs && !tempered) {
    lp_log_sum = row_logprobs(logits, raw_max, 1.0f, p.top_logprobs, s, out);
    if (modifies) {
      std::memcpy(s.raw.data(), logits, static_cast<size_t>(n) * sizeof(float));
      raw = s.raw.data();
    }
  }

  // 2. Penalties, 3. logit bias (both change the argmax, so greedy rows apply them too).
  if (p.has_penalties()) apply_penalties(logits, row, s);
  for (const auto& [id, bias] : p.logit_bias) {
    VELA_CHECK(id >= 0 && id < n, "Sampler: logit_bias token id ", id,
               " is outside the vocabulary [0, ", n, ")");
    logits[id] += bias;
  }

  if (tempered) {  // greedy rows: T = 1
    bool nan_after = false;
    lp_scale = p.is_greedy() ? 1.0f : 1.0f / p.temperature;
    const float m = max_value(logits, n, &nan_after);
    lp_log_sum = row_logprobs(logits, m, lp_scale, p.top_logprobs, s, out);
    lp_max = m * lp_scale;
  }

  // 4-8. Greedy, or temperature / top-k / top-p / min-p and one draw.
  int32_t token;
  if (p.is_greedy()) {
    token = argmax_lower_id(logits, n);
  } else {
    token = sample_filtered(logits, p, philox_uniform(row.seed, row.stream, row.step), s);
  }
  out.token = token;
  if (p.logprobs) out.logprob = (raw[token] * lp_scale - lp_max) - lp_log_sum;
}

float Sampler::row_logprobs(const float* row, float row_max, float scale, int32_t top_logprobs,
                            Scratch& s, SampleResult& out) const {
  const int64_t n = vocab_size_;
  const float m = row_max * scale;
  float log_sum;
  if (scale == 1.0f) {
    log_sum = static_cast<float>(std::log(ops::cpu::exp_shift_sum(row, s.prob.data(), n, m)));
  } else {
    exp_weights(row, s.prob.data(), n, scale, m);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += s.prob[static_cast<size_t>(i)];
    log_sum = static_cast<float>(std::log(sum));
  }
  if (top_logprobs > 0) {
    // Insertion into a sorted list of at most k entries while scanning ids upward: an equal value
    // never displaces an earlier (lower) id. scale > 0 keeps the order of the unscaled row.
    const auto k = static_cast<size_t>(std::min(top_logprobs, SamplingParams::kMaxTopLogprobs));
    s.top.clear();
    for (int64_t i = 0; i < n; ++i) {
      const float v = row[i];
      if (s.top.size() == k && !(v > s.top.back().first)) continue;
      std::pair<float, int32_t> e{v, static_cast<int32_t>(i)};
      auto pos = std::upper_bound(s.top.begin(), s.top.end(), e, before);
      s.top.insert(pos, e);
      if (s.top.size() > k) s.top.pop_back();
    }
    for (const auto& [v, id] : s.top) out.top_logprobs.emplace_back(id, (v * scale - m) - log_sum);
  }
  return log_sum;
}

void Sampler::apply_penalties(float* logits, const SamplerRow& row, Scratch& s) const {
  const SamplingParams& p = *row.params;
  // Validate before touching the scratch marks, so an error leaves them clean.
  check_tokens(row.prompt, vocab_size_, "prompt");
  check_tokens(row.output, vocab_size_, "output");
  static const std::vector<int32_t> kEmpty;
  const std::vector<int32_t>& prompt = row.prompt ? *row.prompt : kEmpty;
  const std::vector<int32_t>& output = row.output ? *row.output : kEmpty;

  // Repetition (HF / vLLM): once per distinct token of prompt + output.
  if (p.repetition_penalty != 1.0f) {
    const float rp = p.repetition_penalty;
    auto penalize = [&](int32_t t) {
      if (s.seen[t]) return;
      s.seen[t] = 1;
      logits[t] = logits[t] > 0.0f ? logits[t] / rp : logits[t] * rp;
    };
    for (int32_t t : prompt) penalize(t);
    for (int32_t t : output) penalize(t);
    for (int32_t t : prompt) s.seen[t] = 0;
    for (int32_t t : output) s.seen[t] = 0;
  }
  // Frequency and presence (OpenAI), in vLLM's order: logit -= f * count; logit -= p * [count > 0].
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (int32_t t : output) ++s.count[t];
    for (int32_t t : output) {
      const int32_t c = s.count[t];
      if (c == 0) continue;  // already applied
      logits[t] -= p.frequency_penalty * static_cast<float>(c);
      logits[t] -= p.presence_penalty;
      s.count[t] = 0;
    }
  }
}

int32_t Sampler::sample_filtered(const float* logits, const SamplingParams& p, float u,
                                 Scratch& s) const {
  const int64_t n = vocab_size_;
  double mass = 0.0;
  if (!filter_weights(logits, p, s, &mass)) return argmax_lower_id(logits, n);
  const float* w = s.prob.data();
  // Inverse CDF in ascending id order: the first kept token whose cumulative mass exceeds u * mass
  // (same summation order as `mass`, so some token always qualifies).
  const double target = static_cast<double>(u) * mass;
  double cum = 0.0;
  int32_t last = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!(w[i] > 0.0f)) continue;
    cum += w[i];
    last = static_cast<int32_t>(i);
    if (cum > target) return last;
  }
  return last >= 0 ? last : argmax_lower_id(logits, n);
}

bool Sampler::filter_weights(const float* logits, const SamplingParams& p, Scratch& s,
                             double* total) const {
  const int64_t n = vocab_size_;
  bool has_nan = false;
  const float m = max_value(logits, n, &has_nan);
  if (m == kNegInf) return false;  // every token banned: nothing to sample

  // Temperature: weights w = exp((l - max) / T) = p / p_max, never normalized explicitly.
  const float scale = 1.0f / p.temperature;
  float* w = s.prob.data();
  exp_weights(logits, w, n, scale, m * scale);

  // Top-k: keep logits >= the k-th largest (ties with it are kept, as HF and vLLM do).
  float kth = kNegInf;
  if (p.top_k > 0 && p.top_k < n) kth = kth_largest(logits, n, p.top_k, s.heap.data());

  // Top-p over the top-k survivors: the cut is the first candidate, in (logit desc, id asc)
  // order, at which the cumulative mass reaches top_p; the kept set is every key up to and
  // including it.
  bool use_cut = false;
  std::pair<float, int32_t> cut{0.0f, 0};
  if (p.top_p < 1.0f) {
    auto* cand = s.sorted.data();
    int64_t n_cand = 0;
    double mass = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      if (logits[i] >= kth && w[i] > 0.0f) {
        mass += w[i];
        cand[n_cand++] = {logits[i], static_cast<int32_t>(i)};
      }
    }
    use_cut = find_top_p_cut(cand, n_cand, w, static_cast<double>(p.top_p) * mass, &cut);
  }

  // Min-p: p < min_p * p_max  <=>  w < min_p (the row maximum always stays). Dropped tokens get
  // weight 0, so the draw below is one plain walk.
  const float min_w = p.min_p;
  if (kth > kNegInf || use_cut || min_w > 0.0f) {
    for (int64_t i = 0; i < n; ++i) {
      const float l = logits[i];
      if (l < kth || (w[i] < min_w && l != m) ||
          (use_cut && before(cut, {l, static_cast<int32_t>(i)})))
        w[i] = 0.0f;
    }
  }
  double mass = 0.0;
  for (int64_t i = 0; i < n; ++i) mass += w[i];
  *total = mass;
  return mass > 0.0;
}

void Sampler::distribution(Tensor& logits, const std::vector<SamplerRow>& rows, float* probs) {
  VELA_CHECK(logits.defined() && logits.is_cpu() && logits.dtype() == DType::kF32 &&
                 logits.dim() == 2 && logits.size(1) == vocab_size_ &&
                 (logits.size(1) == 1 || logits.stride(1) == 1),
             "Sampler::distribution: logits must be f32 [n_rows, ", vocab_size_,
             "] on the CPU with unit column stride, got ",
             logits.defined() ? logits.str() : std::string("undefined"));
  const int64_t n_rows = logits.size(0), n = vocab_size_;
  VELA_CHECK(static_cast<int64_t>(rows.size()) == n_rows && n_rows <= max_rows_,
             "Sampler::distribution: ", rows.size(), " rows for logits ", logits.str(),
             " (max_rows ", max_rows_, ")");
  Scratch& s = workers_[0];
  for (int64_t r = 0; r < n_rows; ++r) {
    const SamplerRow& row = rows[static_cast<size_t>(r)];
    VELA_CHECK(row.params != nullptr, "Sampler: a row has no SamplingParams");
    const SamplingParams& p = *row.params;
    float* l = logits.data<float>() + r * logits.stride(0);
    float* out = probs + r * n;
    for (int64_t i = 0; i < n; ++i)
      if (l[i] != l[i]) l[i] = kNegInf;
    if (p.has_penalties()) apply_penalties(l, row, s);
    for (const auto& [id, bias] : p.logit_bias) {
      VELA_CHECK(id >= 0 && id < n, "Sampler: logit_bias token id ", id,
                 " is outside the vocabulary [0, ", n, ")");
      l[id] += bias;
    }
    double mass = 0.0;
    if (p.is_greedy() || !filter_weights(l, p, s, &mass)) {
      std::fill(out, out + n, 0.0f);
      out[argmax_lower_id(l, n)] = 1.0f;
      continue;
    }
    const double inv = 1.0 / mass;
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<float>(s.prob[static_cast<size_t>(i)] * inv);
  }
}

}  // namespace vela
