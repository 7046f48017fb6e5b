// CPU sampling op (ops/sampling.h): the reference implementation and the engine's CPU sampler.
// Rows run in parallel, each on one thread with that thread's scratch (grown once, then reused).
// Per row: NaN scan and raw logprobs; penalties and bias into `work` (a copy plus sparse
// scatters, or one fused pass over a count-table row); tempered logprobs; then greedy argmax, or
// exp weights and the filters as thresholds over the row (top-k: the k-th largest logit by a
// bounded heap or nth_element; top-p: a cut rank in (logit desc, id asc) order found by a
// weighted quickselect over fixed-point weights, no full sort; min-p: a weight floor) and a draw
// that walks the kept ids ascending in blocks. AVX-512 where the build targets it, scalar loops
// otherwise. This file is compiled with -ffp-contract=off (CMakeLists.txt): products and
// differences are rounded one by one, as the CUDA kernel's __fmul_rn / __fsub_rn are.
#include "ops/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "core/rng.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
using Cand = std::pair<float, int32_t>;  // (logit, id)

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

struct RowScratch {
  std::vector<float> clean;  // [vocab] the raw row with NaN -> -inf (rows that have NaNs)
  std::vector<float> prob;   // [vocab] weights exp(l * s - m * s); raw exps for logprobs
  std::vector<float> heap;   // [vocab] top-k selection
  std::vector<Cand> cand;    // [vocab] top-p candidates
  std::vector<Cand> top;     // [kSampleMaxTopLogprobs + 1] best (logit, id) for top logprobs
  std::vector<uint64_t> bucket_mass = std::vector<uint64_t>(512);  // top-p: mass per d bucket
  void reserve(int64_t n) {
    const auto v = static_cast<size_t>(n);
    if (prob.size() >= v) return;
    clean.resize(v);
    prob.resize(v);
    heap.resize(v);
    cand.resize(v);
    top.reserve(kSampleMaxTopLogprobs + 1);
  }
};

// Largest non-NaN value of row[0..n) (-inf when none); *has_nan reports NaNs; *arg is the first
// index holding it (meaningful only when the row has no NaN): the greedy token in the same pass.
// (AVX-512 masks; the `omp simd` max + NaN reduction it replaces, plus a second pass for the
// index, made a greedy 151936-wide row 73-81 us against 19-21 now.)
float max_value(const float* row, int64_t n, bool* has_nan, int32_t* arg) {
  float m = kNegInf;
  int64_t at = 0, i = 0;
  bool any_nan = false;
#if defined(__AVX512F__)
  if (n >= 16) {
    // Per lane the first index of its strictly greater values; then the lowest index among the
    // lanes that hold the max (ids ascending within a lane, so that is the row's first).
    __m512 vmax = _mm512_set1_ps(kNegInf);
    __m512i vidx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i cur = vidx;
    const __m512i step = _mm512_set1_epi32(16);
    __mmask16 nan = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(row + i);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      const __mmask16 gt = _mm512_cmp_ps_mask(v, vmax, _CMP_GT_OQ);
      vmax = _mm512_mask_mov_ps(vmax, gt, v);
      vidx = _mm512_mask_mov_epi32(vidx, gt, cur);
      cur = _mm512_add_epi32(cur, step);
    }
    m = _mm512_reduce_max_ps(vmax);
    const __mmask16 at_max = _mm512_cmp_ps_mask(vmax, _mm512_set1_ps(m), _CMP_EQ_OQ);
    at = _mm512_mask_reduce_min_epi32(at_max, vidx);
    any_nan = nan != 0;
  }
#endif
  for (; i < n; ++i) {
    any_nan |= row[i] != row[i];
    if (row[i] > m) {
      m = row[i];
      at = i;
    }
  }
  *has_nan = any_nan;
  *arg = static_cast<int32_t>(at);
  return m;
}

// The first index holding m (ties to the lower id); 0 when none (a row of NaN / -inf).
int32_t first_index_of(const float* row, int64_t n, float m) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 vm = _mm512_set1_ps(m);
  for (; i + 16 <= n; i += 16) {
    const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(row + i), vm, _CMP_EQ_OQ);
    if (eq) return static_cast<int32_t>(i + __builtin_ctz(eq));
  }
#endif
  for (; i < n; ++i)
    if (row[i] == m) return static_cast<int32_t>(i);
  return 0;
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
    __m512 e = exp512(_mm512_sub_ps(_mm512_mul_ps(v, vs), vshift));
    __mmask16 finite = _mm512_cmp_ps_mask(v, vninf, _CMP_NEQ_OQ);
    _mm512_storeu_ps(w + i, _mm512_maskz_mov_ps(finite, e));
  }
#endif
  for (; i < n; ++i) w[i] = x[i] == kNegInf ? 0.0f : std::exp(x[i] * scale - shift);
}

// Sum of sample_fixed(w[i]) over [0, n): exact (integers), so in any order.
uint64_t fixed_sum(const float* w, int64_t n) {
  uint64_t s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += sample_fixed(w[i]);
  return s;
}

// The k-th largest value of row[0..n) counting multiplicity (1 <= k <= n). A bounded min-heap
// when k is small (one compare per element), nth_element on a copy otherwise.
float kth_largest(const float* row, int64_t n, int64_t k, float* buf) {
  if (k * 16 <= n) {
    int64_t size = 0, i = 0;
    for (; i < n && size < k; ++i) {
      buf[size++] = row[i];
      std::push_heap(buf, buf + size, std::greater<float>());
    }
    auto offer = [&](float v) {
      if (v > buf[0]) {
        std::pop_heap(buf, buf + size, std::greater<float>());
        buf[size - 1] = v;
        std::push_heap(buf, buf + size, std::greater<float>());
      }
    };
#if defined(__AVX512F__)
    // 16 values against the heap's minimum at once: after the first few thousand, hardly any
    // beats it (the k-th largest does not depend on the order values are offered in).
    for (; i + 16 <= n; i += 16) {
      __mmask16 above =
          _mm512_cmp_ps_mask(_mm512_loadu_ps(row + i), _mm512_set1_ps(buf[0]), _CMP_GT_OQ);
      while (above) {
        offer(row[i + __builtin_ctz(above)]);
        above &= static_cast<__mmask16>(above - 1);
      }
    }
#endif
    for (; i < n; ++i) offer(row[i]);
    return buf[0];
  }
  std::memcpy(buf, row, static_cast<size_t>(n) * sizeof(float));
  std::nth_element(buf, buf + (k - 1), buf + n, std::greater<float>());
  return buf[k - 1];
}

// (logit desc, id asc): the order of top-p's cumulative mass and of top logprobs (-0.0 and +0.0
// compare equal, as their sample_key does).
bool before(const Cand& a, const Cand& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// The top-p cut: the first candidate in `before` order at which the cumulative fixed-point weight
// reaches `target`, by a weighted quickselect (expected linear time; no full sort of what may be
// most of the vocabulary). Keys are unique (ids are), so each round splits the range into the keys
// before a pivot, the pivot, and the keys after it, and keeps the part where the target falls.
// Pivots are medians of three positions from a fixed-seed LCG: deterministic, and no input order
// makes it quadratic in expectation; after 64 rounds the rest is simply sorted. Returns false when
// the target is never reached (keep everything).
bool find_top_p_cut(Cand* cand, int64_t n, const float* w, uint64_t target, Cand* cut) {
  int64_t lo = 0, hi = n;
  uint64_t acc = 0;  // weight of the candidates known to come before [lo, hi)
  uint64_t state = 0x853C49E6748FEA9Bull;
  auto pick = [&]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return cand[lo + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(hi - lo))];
  };
  for (int round = 0; hi - lo > 32 && round < 64; ++round) {
    Cand a = pick(), b = pick(), c = pick();
    if (before(b, a)) std::swap(a, b);
    if (before(c, b)) std::swap(b, c);
    if (before(b, a)) std::swap(a, b);
    const Cand pivot = b;
    Cand* mid =
        std::partition(cand + lo, cand + hi, [&](const Cand& x) { return before(x, pivot); });
    uint64_t mass_before = 0;
    for (Cand* q = cand + lo; q < mid; ++q) mass_before += sample_fixed(w[q->second]);
    if (acc + mass_before >= target) {
      hi = mid - cand;
      continue;
    }
    acc += mass_before;
    std::iter_swap(mid, std::find(mid, cand + hi, pivot));  // the pivot right after its prefix
    acc += sample_fixed(w[pivot.second]);
    if (acc >= target) {
      *cut = pivot;
      return true;
    }
    lo = (mid - cand) + 1;
  }
  std::sort(cand + lo, cand + hi, before);
  for (int64_t j = lo; j < hi; ++j) {
    acc += sample_fixed(w[cand[j].second]);
    if (acc >= target) {
      *cut = cand[j];
      return true;
    }
  }
  return false;
}

// log sum exp(scale * (x - x_max)) over the row (x_max its max, scale > 0), and the k best
// entries' logprobs (k = min(n_top, n)) written to `out`. Returns the log-sum.
float row_logprobs(const float* x, int64_t n, float x_max, float scale, int32_t n_top,
                   RowScratch& s, int32_t* out, int64_t os, int64_t row) {
  const float m = x_max * scale;
  float log_sum;
  if (scale == 1.0f) {
    log_sum = static_cast<float>(std::log(exp_shift_sum(x, s.prob.data(), n, m)));
  } else {
    exp_weights(x, s.prob.data(), n, scale, m);
    log_sum = static_cast<float>(std::log(sum_of(s.prob.data(), n)));
  }
  const auto k = static_cast<size_t>(std::min<int64_t>(std::min(n_top, kSampleMaxTopLogprobs), n));
  if (k == 0) return log_sum;
  // Insertion into a sorted list of at most k entries while scanning ids upward: an equal value
  // never displaces an earlier (lower) id. scale > 0 keeps the order of the unscaled row.
  s.top.clear();
  auto offer = [&](int64_t i) {
    const float v = x[i];
    if (s.top.size() == k && !(v > s.top.back().first)) return;
    const Cand e{v, static_cast<int32_t>(i)};
    s.top.insert(std::upper_bound(s.top.begin(), s.top.end(), e, before), e);
    if (s.top.size() > k) s.top.pop_back();
  };
  int64_t i = 0;
  for (; i < n && s.top.size() < k; ++i) offer(i);
#if defined(__AVX512F__)
  // Once the list is full, 16 ids at a time against its last value; the few above it are offered
  // in ascending id order, as the plain loop does.
  for (; i + 16 <= n; i += 16) {
    __mmask16 above =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), _mm512_set1_ps(s.top.back().first), _CMP_GT_OQ);
    while (above) {
      offer(i + __builtin_ctz(above));
      above &= static_cast<__mmask16>(above - 1);
    }
  }
#endif
  for (; i < n; ++i) offer(i);
  for (size_t j = 0; j < k; ++j) {
    out[(kSampleOutTopIds + static_cast<int64_t>(j)) * os + row] = s.top[j].second;
    out[(kSampleOutTopLogprobs + static_cast<int64_t>(j)) * os + row] =
        float_to_bits((s.top[j].first * scale - m) - log_sum);
  }
  return log_sum;
}

// Repetition, then frequency / presence (vLLM's order) on one logit with history value c.
inline float penalized(float v, int32_t c, const SampleRowParams& p) {
  if ((p.flags & kSampleRepetition) && c != 0) v = v > 0.0f ? v / p.repetition : v * p.repetition;
  if ((p.flags & kSampleFreqPresence) && (c >> 1) > 0) {
    v -= p.frequency * static_cast<float>(c >> 1);
    v -= p.presence;
  }
  return v;
}

inline float sanitize(float v) { return v != v ? kNegInf : v; }

// Temperature, top-k, top-p, min-p and the draw at uniform u over l[0..n) (max m > -inf).
int32_t sample_filtered(const float* l, int64_t n, float m, const SampleRowParams& p, float u,
                        RowScratch& s) {
  // Weights w = exp(l * s - m * s) = p / p_max, never normalised explicitly.
  const float sc = p.inv_temperature;
  float* w = s.prob.data();
  exp_weights(l, w, n, sc, m * sc);

  // Top-k: keep logits >= the k-th largest (ties with it are kept, as HF and vLLM do).
  float kth = kNegInf;
  if (p.top_k > 0 && p.top_k < n) kth = kth_largest(l, n, p.top_k, s.heap.data());

  // Top-p over the top-k survivors: the cut is the first candidate, in (logit desc, id asc)
  // order, at which the cumulative mass reaches top_p of their mass; the kept set is every key up
  // to and including it.
  bool use_cut = false;
  Cand cut{0.0f, 0};
  if (p.top_p < 1.0f) {
    // The candidates (l >= kth, w > 0) also fall into buckets of d = (m - l) * s, 1/8 wide (the
    // last open-ended). d never decreases as l does, so each bucket is a contiguous run of the
    // (logit desc, id asc) order: the cut lies in the first bucket whose mass takes the running
    // sum to the target, and a large candidate set is cut down to that bucket before the search
    // (vocab 32000, Gaussian body + peaks, top_p 0.9: 255 -> 153 us a row).
    constexpr int kBuckets = 512;
    constexpr float kPerUnit = 8.0f;
    auto bucket = [&](float v) {
      const float d = (m - v) * sc * kPerUnit;
      return d < static_cast<float>(kBuckets - 1) ? static_cast<int>(d) : kBuckets - 1;
    };
    constexpr int64_t kSmallSet = 4096;  // candidates searched as they are
    // A top-k of at most kSmallSet keeps a small set (ties with the k-th aside): no buckets.
    const bool bucketed = !(p.top_k > 0 && p.top_k <= kSmallSet);
    uint64_t* bucket_mass = s.bucket_mass.data();
    if (bucketed) std::fill(bucket_mass, bucket_mass + kBuckets, uint64_t{0});
    Cand* cand = s.cand.data();
    int64_t n_cand = 0;
    uint64_t mass = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (l[i] >= kth && w[i] > 0.0f) {
        const uint64_t wf = sample_fixed(w[i]);
        mass += wf;
        if (bucketed) bucket_mass[bucket(l[i])] += wf;
        cand[n_cand++] = {l[i], static_cast<int32_t>(i)};
      }
    }
    uint64_t target =
        static_cast<uint64_t>(static_cast<double>(p.top_p) * static_cast<double>(mass));
    if (bucketed && n_cand > kSmallSet) {  // keep only the crossing bucket's candidates
      int cross = -1;
      uint64_t before_cross = 0;  // the mass of the buckets before `cross`
      for (int b = 0; b < kBuckets && cross < 0; ++b) {
        if (before_cross + bucket_mass[b] >= target) {
          cross = b;
        } else {
          before_cross += bucket_mass[b];
        }
      }
      if (cross >= 0) {  // (else the target is never reached: the search below says so)
        int64_t kept = 0;
        for (int64_t c = 0; c < n_cand; ++c)
          if (bucket(cand[c].first) == cross) cand[kept++] = cand[c];
        n_cand = kept;
        target -= before_cross;
      }
    }
    use_cut = find_top_p_cut(cand, n_cand, w, target, &cut);
  }

  // Min-p: p < min_p * p_max  <=>  w < min_p (the row maximum always stays). Dropped tokens get
  // weight 0, so the draw below is one plain walk.
  const float min_w = p.min_p;
  if (kth > kNegInf || use_cut || min_w > 0.0f) {
    int64_t i = 0;
#if defined(__AVX512F__)
    // As the loop below, 16 at a time without branches (whether a token survives the cut is
    // as good as random in id order: the branchy loop mispredicted ~half of them, ~0.5 ms of a
    // 152k row at top_p 0.9).
    const __m512 vkth = _mm512_set1_ps(kth), vmin_w = _mm512_set1_ps(min_w), vm = _mm512_set1_ps(m),
                 vcut = _mm512_set1_ps(cut.first);
    const __m512i vcut_id = _mm512_set1_epi32(cut.second),
                  lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(l + i), wv = _mm512_loadu_ps(w + i);
      __mmask16 drop =
          _mm512_cmp_ps_mask(v, vkth, _CMP_LT_OQ) |
          (_mm512_cmp_ps_mask(wv, vmin_w, _CMP_LT_OQ) & _mm512_cmp_ps_mask(v, vm, _CMP_NEQ_UQ));
      if (use_cut) {
        const __m512i ids = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(i)), lane);
        drop |= _mm512_cmp_ps_mask(v, vcut, _CMP_LT_OQ) |
                (_mm512_cmp_ps_mask(v, vcut, _CMP_EQ_OQ) & _mm512_cmpgt_epi32_mask(ids, vcut_id));
      }
      _mm512_storeu_ps(w + i, _mm512_maskz_mov_ps(static_cast<__mmask16>(~drop), wv));
    }
#endif
    for (; i < n; ++i) {
      const float v = l[i];
      if (v < kth || (w[i] < min_w && v != m) ||
          (use_cut && before(cut, {v, static_cast<int32_t>(i)})))
        w[i] = 0.0f;
    }
  }
  // Inverse CDF in ascending id order: the first kept token whose cumulative fixed-point mass
  // exceeds u * mass. Blocks of 512 are summed first, so only one block is walked one by one.
  constexpr int64_t kBlock = 512;
  const uint64_t mass = fixed_sum(w, n);
  const auto target = static_cast<uint64_t>(static_cast<double>(u) * static_cast<double>(mass));
  uint64_t cum = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    const uint64_t block = fixed_sum(w + b, e - b);
    if (cum + block <= target) {
      cum += block;
      continue;
    }
    for (int64_t i = b; i < e; ++i) {
      cum += sample_fixed(w[i]);
      if (cum > target) return static_cast<int32_t>(i);
    }
  }
  return first_index_of(l, n, m);  // unreachable: target < mass
}

void sample_row(const float* in, const SampleRowParams& p, const int32_t* entries,
                int32_t* counts_row, float* proc, int64_t n, int32_t* out, int64_t os, int64_t row,
                RowScratch& s) {
  bool has_nan = false;
  int32_t raw_arg = 0;
  const float raw_max = max_value(in, n, &has_nan, &raw_arg);
  const float* raw = in;
  if (has_nan) {  // a broken model row; NaN would poison every comparison below
    for (int64_t i = 0; i < n; ++i) s.clean[i] = sanitize(in[i]);
    raw = s.clean.data();
  }

  // 1. Logprobs of the raw row, or (kSampleLogprobsTempered) of the processed one times 1/T.
  const bool want_lp = (p.flags & kSampleLogprobs) != 0;
  const bool tempered = want_lp && (p.flags & kSampleLogprobsTempered);
  const float lp_scale = tempered ? p.inv_temperature : 1.0f;
  float lp_max = kNegInf, lp_log_sum = 0.0f;
  if (want_lp && !tempered) {
    lp_log_sum = row_logprobs(raw, n, raw_max, 1.0f, p.n_top_logprobs, s, out, os, row);
    lp_max = raw_max;
  }

  // 2. Penalties and bias into `proc` (only rows that change; they change the argmax too).
  const float* l = raw;
  float m = raw_max;
  const bool penalize = (p.flags & (kSampleRepetition | kSampleFreqPresence)) != 0;
  if (penalize || p.bias_end > p.bias_begin) {
    if (penalize && counts_row != nullptr) {  // count table: one fused pass
      for (int64_t i = 0; i < n; ++i) proc[i] = sanitize(penalized(raw[i], counts_row[i], p));
    } else {
      std::memcpy(proc, raw, static_cast<size_t>(n) * sizeof(float));
      if (penalize) {
        for (int32_t j = p.pen_begin; j < p.pen_end; ++j) {
          const int32_t id = entries[2 * j];
          proc[id] = sanitize(penalized(proc[id], entries[2 * j + 1], p));
        }
      }
    }
    for (int32_t b = p.bias_begin; b < p.bias_end; ++b)
      proc[entries[2 * b]] += bits_to_float(entries[2 * b + 1]);
    for (int32_t b = p.bias_begin; b < p.bias_end; ++b)
      proc[entries[2 * b]] = sanitize(proc[entries[2 * b]]);  // inf - inf
    l = proc;
    bool unused_nan = false;
    int32_t unused_arg = 0;
    m = max_value(l, n, &unused_nan, &unused_arg);
  }

  if (tempered) {
    lp_log_sum = row_logprobs(l, n, m, lp_scale, p.n_top_logprobs, s, out, os, row);
    lp_max = m * lp_scale;
  }
  const float* lp_row = tempered ? l : raw;

  // 3. Greedy, or the filters and one draw (every token banned: the lowest id).
  int32_t token;
  if ((p.flags & kSampleGreedy) || m == kNegInf) {
    token = l == in ? raw_arg : first_index_of(l, n, m);  // l == in: no NaN, no penalty or bias
  } else {
    token = sample_filtered(l, n, m, p, philox_uniform(p.seed, p.stream, p.step), s);
  }
  out[kSampleOutToken * os + row] = token;
  out[kSampleOutLogprob * os + row] =
      want_lp ? float_to_bits((lp_row[token] * lp_scale - lp_max) - lp_log_sum) : 0;
  if ((p.flags & kSampleUpdateCounts) && counts_row != nullptr) counts_row[token] += 2;
  if (p.flags & kSampleProbs) {  // after every read of `l` (which may be this very row)
    if ((p.flags & kSampleGreedy) || m == kNegInf) {
      std::fill(proc, proc + n, 0.0f);
      proc[token] = 1.0f;
    } else {  // s.prob holds the kept weights (dropped ones 0)
      const float* w = s.prob.data();
      const auto mass = static_cast<double>(fixed_sum(w, n));
      for (int64_t i = 0; i < n; ++i)
        proc[i] = static_cast<float>(static_cast<double>(sample_fixed(w[i])) / mass);
    }
  }
}

}  // namespace

void sample(const Tensor& logits, const Tensor& params, const Tensor& entries, Tensor& counts,
            Tensor& work, Tensor& out, const Tensor& /*chunk_max: the rows are scanned here*/,
            int32_t* next_ids) {
  const int64_t n_rows = logits.size(0), n = logits.size(1);
  const auto* rows = reinterpret_cast<const SampleRowParams*>(params.data_ptr());
  const float* base = logits.data<float>();
  const int64_t stride = logits.stride(0);
  const int32_t* e = entries.data<int32_t>();
  int32_t* c = counts.numel() > 0 ? counts.data<int32_t>() : nullptr;
  float* w = work.data<float>();
  int32_t* o = out.data<int32_t>();
  const int64_t out_stride = out.size(1);
  // Rows of a small vocabulary are too cheap to be worth a thread each.
  parallel_for(n_rows, std::max<int64_t>(1, 16384 / n), [&](int64_t r0, int64_t r1) {
    thread_local RowScratch scratch;
    scratch.reserve(n);
    for (int64_t r = r0; r < r1; ++r) {
      SampleRowParams p;
      std::memcpy(&p, rows + r, sizeof(p));
      int32_t* counts_row =
          (p.slot >= 0 && c != nullptr) ? c + static_cast<int64_t>(p.slot) * n : nullptr;
      sample_row(base + r * stride, p, e, counts_row, w + r * n, n, o, out_stride, r, scratch);
      if (next_ids != nullptr) next_ids[r] = o[kSampleOutToken * out_stride + r];
    }
  });
}

void argmax_chunks(const Tensor& logits, Tensor& chunk_max) {
  const int64_t n_rows = logits.size(0), n = logits.size(1);
  const int64_t n_chunks = argmax_chunk_count(n);
  const float* base = logits.data<float>();
  auto* cm = reinterpret_cast<uint64_t*>(chunk_max.data_ptr());
  parallel_for(n_rows * n_chunks, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t r = i / n_chunks, j = i % n_chunks;
      const float* row = base + r * logits.stride(0);
      const int64_t hi = std::min(n, (j + 1) * kArgmaxChunkCols);
      uint64_t best = 0;
      for (int64_t col = j * kArgmaxChunkCols; col < hi; ++col) {
        const float v = std::isnan(row[col]) ? kNegInf : row[col];
        best = std::max(best, sample_rank(sample_key(v), static_cast<int32_t>(col)));
      }
      cm[r * chunk_max.stride(0) + j] = best;
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
