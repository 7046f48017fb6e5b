// CPU optimizer ops: OpenMP over fixed chunks, fp32 per element. The loop bodies are the ones
// train/optim ran on the host before these ops existed, kept verbatim (the same expressions give
// the same FMA contractions), so CPU training results did not move by a bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/cpu_optim_ops.h"

namespace vela::ops::cpu {

namespace {

constexpr int64_t kGrain = 1 << 14;   // elements per OpenMP chunk at least
constexpr int64_t kSumBlock = 65536;  // the fixed partition of sum_squares

double f64_of(const Tensor& t) {
  double v;
  std::memcpy(&v, t.data_ptr(), sizeof v);
  return v;
}

double block_sum_squares(const float* g, int64_t n) {
  const int64_t n_blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> partial(static_cast<size_t>(n_blocks), 0.0);
  parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t e = std::min(n, (b + 1) * kSumBlock);
      double s = 0;
      for (int64_t i = b * kSumBlock; i < e; ++i) s += static_cast<double>(g[i]) * g[i];
      partial[static_cast<size_t>(b)] = s;
    }
  });
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace

void adamw_update(Tensor& master, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                  Tensor& weight, const AdamWHyper& h) {
  const float b1 = h.b1, b2 = h.b2, step_size = h.step_size, inv_sqrt_bc2 = h.inv_sqrt_bc2;
  const float eps = h.eps, decay = h.decay;
  const float* g = grad.data<float>();
  float* w = master.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  parallel_for(grad.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float gi = g[i];
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + eps;
      w[i] = w[i] * decay - step_size * (m[i] / denom);
    }
  });
  // The compute weights: the master rounded to nearest even (what ops::to_dtype does).
  if (weight.defined()) cast(master, weight);
}

void muon_momentum(Tensor& buf_t, const Tensor& grad, Tensor& u_t, float mu, bool nesterov) {
  const float* g = grad.data<float>();
  float* buf = buf_t.data<float>();
  float* u = u_t.data<float>();
  parallel_for(grad.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      buf[i] = mu * buf[i] + (1.0f - mu) * g[i];
      u[i] = nesterov ? (1.0f - mu) * g[i] + mu * buf[i] : buf[i];
    }
  });
}

void decayed_step(Tensor& w, const Tensor& update, float decay, float step) {
  const float* op = update.data<float>();
  float* wb = w.data<float>();
  parallel_for(w.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) wb[i] = wb[i] * decay - step * op[i];
  });
}

void sum_squares(const std::vector<Tensor>& xs, Tensor& out) {
  double total = 0;
  for (const Tensor& x : xs) total += block_sum_squares(x.data<float>(), x.numel());
  std::memcpy(out.data_ptr(), &total, sizeof total);
}

void scale_by_norm(std::vector<Tensor>& xs, const Tensor& sum_sq, double numer, double eps,
                   double threshold) {
  const double norm = std::sqrt(f64_of(sum_sq));
  if (!std::isfinite(norm) || norm <= threshold) return;
  const float scale = static_cast<float>(numer / (norm + eps));
  for (Tensor& x : xs) {
    float* g = x.data<float>();
    parallel_for(x.numel(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) g[i] *= scale;
    });
  }
}

}  // namespace vela::ops::cpu
