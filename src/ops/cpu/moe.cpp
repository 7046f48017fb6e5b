// CPU mixture-of-experts ops: the reference twins of ops/cuda/moe.cu. Routing is per row in fp32;
// the grouped GEMM reads the expert offsets on the host and runs one OpenBLAS GEMM per non-empty
// expert segment; combine accumulates each token's k expert rows in slot order in fp32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/vec.h"
#include "ops/gemm.h"
#include "ops/moe_impl.h"

namespace vela::ops::cpu {

namespace {

// p = softmax(l) over n entries; returns log-sum-exp.
float softmax_row(const float* l, int64_t n, float* p) {
  float m = -INFINITY;
  for (int64_t e = 0; e < n; ++e) m = std::max(m, l[e]);
  double s = 0;
  for (int64_t e = 0; e < n; ++e) {
    p[e] = std::exp(l[e] - m);
    s += p[e];
  }
  const float inv = static_cast<float>(1.0 / s);
  for (int64_t e = 0; e < n; ++e) p[e] *= inv;
  return m + static_cast<float>(std::log(s));
}

// The segment bounds of every expert, checked (they come from moe_permute or the caller).
std::vector<int32_t> host_offsets(const Tensor& offsets, int64_t n_rows) {
  std::vector<int32_t> o = offsets.to_vector<int32_t>();
  VELA_CHECK(o.front() == 0 && o.back() == n_rows, "grouped_gemm: offsets must run from 0 to ",
             n_rows, " (the rows of a), got ", o.front(), " .. ", o.back());
  for (size_t e = 1; e < o.size(); ++e)
    VELA_CHECK(o[e] >= o[e - 1], "grouped_gemm: offsets must be non-decreasing, offsets[", e,
               "] = ", o[e], " < ", o[e - 1]);
  return o;
}

}  // namespace

void moe_route(const Tensor& logits, int64_t k, bool normalize, Tensor& weights,
               Tensor& expert_ids) {
  const int64_t n = logits.size(0), n_exp = logits.size(1);
  const float* l = logits.data<float>();
  float* w = weights.data<float>();
  int32_t* ids = expert_ids.data<int32_t>();
  parallel_for(n, 64, [&](int64_t r0, int64_t r1) {
    std::vector<float> p(static_cast<size_t>(n_exp));
    std::vector<char> taken(static_cast<size_t>(n_exp));
    for (int64_t r = r0; r < r1; ++r) {
      softmax_row(l + r * n_exp, n_exp, p.data());
      std::fill(taken.begin(), taken.end(), 0);
      float sum = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < n_exp; ++e)
          if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;  // ties: lower index
        taken[best] = 1;
        w[r * k + j] = p[best];
        ids[r * k + j] = static_cast<int32_t>(best);
        sum += p[best];
      }
      if (normalize)
        for (int64_t j = 0; j < k; ++j) w[r * k + j] /= sum;
    }
  });
}

void moe_route_backward(const Tensor& logits, const Tensor& expert_ids, const Tensor& dweights,
                        bool normalize, const Tensor& dprob_bias, float z_scale, Tensor& dlogits) {
  const int64_t n = logits.size(0), n_exp = logits.size(1), k = expert_ids.size(1);
  const float* l = logits.data<float>();
  const int32_t* ids = expert_ids.data<int32_t>();
  const float* dw = dweights.data<float>();
  const float* bias = dprob_bias.defined() ? dprob_bias.data<float>() : nullptr;
  float* dl = dlogits.data<float>();
  parallel_for(n, 64, [&](int64_t r0, int64_t r1) {
    std::vector<float> p(static_cast<size_t>(n_exp)), dp(static_cast<size_t>(n_exp));
    for (int64_t r = r0; r < r1; ++r) {
      const float lse = softmax_row(l + r * n_exp, n_exp, p.data());
      for (int64_t e = 0; e < n_exp; ++e) dp[e] = bias ? bias[e] : 0.0f;
      const int32_t* id = ids + r * k;
      const float* g = dw + r * k;
      if (normalize) {
        float s = 0, dot = 0;
        for (int64_t j = 0; j < k; ++j) s += p[id[j]];
        for (int64_t j = 0; j < k; ++j) dot += g[j] * p[id[j]] / s;
        for (int64_t j = 0; j < k; ++j) dp[id[j]] += (g[j] - dot) / s;
      } else {
        for (int64_t j = 0; j < k; ++j) dp[id[j]] += g[j];
      }
      double dot = 0;
      for (int64_t e = 0; e < n_exp; ++e) dot += static_cast<double>(p[e]) * dp[e];
      const float z = 2.0f * z_scale * lse;
      for (int64_t e = 0; e < n_exp; ++e)
        dl[r * n_exp + e] = p[e] * (dp[e] - static_cast<float>(dot) + z);
    }
  });
}

void moe_permute(const Tensor& expert_ids, int64_t n_experts, Tensor& offsets, Tensor& src_rows,
                 Tensor& dst_rows) {
  const int64_t n = expert_ids.size(0), k = expert_ids.size(1), m = n * k;
  const int32_t* ids = expert_ids.data<int32_t>();
  int32_t* off = offsets.data<int32_t>();
  std::vector<int32_t> next(static_cast<size_t>(n_experts) + 1, 0);
  for (int64_t i = 0; i < m; ++i) {
    VELA_CHECK(ids[i] >= 0 && ids[i] < n_experts, "moe_permute: expert id ", ids[i], " at ", i,
               " is outside [0, ", n_experts, ")");
    ++next[static_cast<size_t>(ids[i]) + 1];
  }
  for (int64_t e = 0; e < n_experts; ++e) next[e + 1] += next[e];
  std::copy(next.begin(), next.end(), off);
  int32_t* src = src_rows.data<int32_t>();
  int32_t* dst = dst_rows.data<int32_t>();
  for (int64_t i = 0; i < m; ++i) {
    const int32_t row = next[ids[i]]++;
    src[row] = static_cast<int32_t>(i / k);
    dst[i] = row;
  }
}

void grouped_gemm(const Tensor& a, const Tensor& w, const Tensor& offsets, bool trans_w,
                  Tensor& out) {
  std::vector<int32_t> o = host_offsets(offsets, a.size(0));
  for (int64_t e = 0; e < w.size(0); ++e) {
    if (o[e + 1] == o[e]) continue;
    Tensor c = out.slice(0, o[e], o[e + 1]);
    ops::gemm(a.slice(0, o[e], o[e + 1]), w.select(0, e), c, false, trans_w);
  }
}

void grouped_gemm_wgrad(const Tensor& dy, const Tensor& x, const Tensor& offsets, Tensor& dw) {
  std::vector<int32_t> o = host_offsets(offsets, dy.size(0));
  for (int64_t e = 0; e < dw.size(0); ++e) {
    if (o[e + 1] == o[e]) continue;
    Tensor c = dw.select(0, e);
    ops::gemm(dy.slice(0, o[e], o[e + 1]), x.slice(0, o[e], o[e + 1]), c, true, false, 1.0f, 1.0f);
  }
}

namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

template <typename T>
void combine_typed(const Tensor& y, const Tensor& dst_rows, const Tensor& weights,
                   const Tensor& shared, const Tensor& shared_logit, Tensor& out) {
  const int64_t n = dst_rows.size(0), k = dst_rows.size(1), h = y.size(1), m = y.size(0);
  const T* py = y.data<T>();
  const int32_t* dst = dst_rows.data<int32_t>();
  const float* w = weights.defined() ? weights.data<float>() : nullptr;
  const T* ps = shared.defined() ? shared.data<T>() : nullptr;
  const float* sl = shared.defined() ? shared_logit.data<float>() : nullptr;
  T* po = out.data<T>();
  for (int64_t i = 0; i < n * k; ++i)
    VELA_CHECK(dst[i] >= 0 && dst[i] < m, "moe_combine: dst_rows[", i, "] = ", dst[i],
               " is outside the ", m, " rows of y");
  parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(h, 1)),
               [&](int64_t t0, int64_t t1) {
                 std::vector<float> acc(static_cast<size_t>(h));
                 for (int64_t t = t0; t < t1; ++t) {
                   std::fill(acc.begin(), acc.end(), 0.0f);
                   for (int64_t j = 0; j < k; ++j) {
                     const float wj = w ? w[t * k + j] : 1.0f;
                     const T* row = py + static_cast<int64_t>(dst[t * k + j]) * h;
                     for (int64_t c = 0; c < h; ++c) acc[c] += wj * to_f32(row[c]);
                   }
                   if (ps) {
                     const float g = sigmoid(sl[t]);
                     for (int64_t c = 0; c < h; ++c) acc[c] += g * to_f32(ps[t * h + c]);
                   }
                   for (int64_t c = 0; c < h; ++c) po[t * h + c] = from_f32<T>(acc[c]);
                 }
               });
}

template <typename T>
void combine_backward_typed(const Tensor& dout, const Tensor& y, const Tensor& dst_rows,
                            const Tensor& weights, const Tensor& shared, const Tensor& shared_logit,
                            Tensor& dy, Tensor& dweights, Tensor& dshared, Tensor& dshared_logit) {
  const int64_t n = dst_rows.size(0), k = dst_rows.size(1), h = y.size(1);
  const T* pd = dout.data<T>();
  const T* py = y.data<T>();
  const int32_t* dst = dst_rows.data<int32_t>();
  const float* w = weights.data<float>();
  T* pdy = dy.data<T>();
  float* pdw = dweights.data<float>();
  parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(h, 1)),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) {
                   const T* d = pd + t * h;
                   for (int64_t j = 0; j < k; ++j) {
                     const int64_t row = dst[t * k + j];
                     const float wj = w[t * k + j];
                     double dot = 0;
                     for (int64_t c = 0; c < h; ++c) {
                       const float dv = to_f32(d[c]);
                       dot += static_cast<double>(dv) * to_f32(py[row * h + c]);
                       pdy[row * h + c] = from_f32<T>(wj * dv);
                     }
                     pdw[t * k + j] = static_cast<float>(dot);
                   }
                   if (shared.defined()) {
                     const T* s = shared.data<T>() + t * h;
                     const float g = sigmoid(shared_logit.data<float>()[t]);
                     T* ds = dshared.data<T>() + t * h;
                     double dot = 0;
                     for (int64_t c = 0; c < h; ++c) {
                       const float dv = to_f32(d[c]);
                       dot += static_cast<double>(dv) * to_f32(s[c]);
                       ds[c] = from_f32<T>(g * dv);
                     }
                     dshared_logit.data<float>()[t] = static_cast<float>(dot) * g * (1.0f - g);
                   }
                 }
               });
}

}  // namespace

void moe_combine(const Tensor& y, const Tensor& dst_rows, const Tensor& weights,
                 const Tensor& shared, const Tensor& shared_logit, Tensor& out) {
  visit_float(y.dtype(), [&](auto tag) {
    combine_typed<typename decltype(tag)::type>(y, dst_rows, weights, shared, shared_logit, out);
  });
}

void moe_combine_backward(const Tensor& dout, const Tensor& y, const Tensor& dst_rows,
                          const Tensor& weights, const Tensor& shared, const Tensor& shared_logit,
                          Tensor& dy, Tensor& dweights, Tensor& dshared, Tensor& dshared_logit) {
  visit_float(y.dtype(), [&](auto tag) {
    combine_backward_typed<typename decltype(tag)::type>(
        dout, y, dst_rows, weights, shared, shared_logit, dy, dweights, dshared, dshared_logit);
  });
}

}  // namespace vela::ops::cpu
