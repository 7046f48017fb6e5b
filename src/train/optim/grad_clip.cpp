// Global-norm clipping; see grad_clip.h. Deterministic block-wise reduction on the host.
#include "train/optim/grad_clip.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/elementwise.h"

namespace vela {
namespace {

constexpr int64_t kBlock = 65536;

double sum_squares(const float* g, int64_t n) {
  const int64_t n_blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(n_blocks), 0.0);
  parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t e = std::min(n, (b + 1) * kBlock);
      double s = 0;
      for (int64_t i = b * kBlock; i < e; ++i) s += static_cast<double>(g[i]) * g[i];
      partial[static_cast<size_t>(b)] = s;
    }
  });
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace

double grad_global_norm(const ParameterList& params) {
  double total = 0;
  for (const Parameter& p : params) {
    VELA_CHECK(p.grad.defined(), "parameter ", p.name, " has no gradient tensor");
    VELA_CHECK(p.grad.dtype() == DType::kF32, "gradient of ", p.name, " must be f32, got ",
               p.grad.str());
    Tensor g = p.grad.to(Device::cpu()).contiguous();
    total += sum_squares(g.data<float>(), g.numel());
  }
  return std::sqrt(total);
}

double clip_grad_norm(ParameterList& params, double max_norm) {
  const double norm = grad_global_norm(params);
  if (max_norm <= 0 || !std::isfinite(norm) || norm <= max_norm) return norm;
  const float scale = static_cast<float>(max_norm / (norm + 1e-6));
  for (Parameter& p : params) {
    if (p.grad.is_cpu() && p.grad.is_contiguous()) {
      float* g = p.grad.data<float>();
      parallel_for(p.grad.numel(), 1 << 14, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) g[i] *= scale;
      });
    } else {
      ops::scale(p.grad, scale, p.grad);
    }
  }
  return norm;
}

}  // namespace vela
