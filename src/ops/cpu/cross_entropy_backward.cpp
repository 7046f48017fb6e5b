// CPU cross_entropy backward: per row softmax (max-subtracted, sum in double), then
// dlogits = grad_scale * (p - (1 - eps) * onehot - eps / vocab); zero rows where ignored. The
// optional losses come from the forward kernel (cross_entropy), run first.
#include <cmath>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_backward_ops.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                            float grad_scale, int32_t ignore_index, float label_smoothing,
                            const Tensor& losses) {
  if (losses.defined()) {  // the forward's very numbers, before dlogits may overwrite the logits
    Tensor l = losses;
    cross_entropy(logits, targets, l, ignore_index, label_smoothing);
  }
  RowLayout rx = rows_of(logits), rg = rows_of(dlogits);
  const int64_t n = rx.n_cols;
  const int32_t* pt = targets.data<int32_t>();
  float* pg = dlogits.data<float>();
  const float eps = label_smoothing;
  const float uniform = eps / static_cast<float>(n);
  visit_float(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = static_cast<const T*>(logits.data_ptr());
    parallel_for(rx.n_rows, std::max<int64_t>(1, 16384 / n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* g = pg + r * rg.row_stride;
        if (pt[r] == ignore_index) {
          std::fill(g, g + n, 0.0f);
          continue;
        }
        // Widen first: dlogits may alias f32 logits, and row_as_f32 returns the row itself then.
        const float* xf = row_as_f32(px + r * rx.row_stride, n, 0);
        float m = max_of(xf, n);
        double sum = 0.0;
        for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(xf[j] - m));
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < n; ++j) g[j] = grad_scale * (std::exp(xf[j] - m) * inv - uniform);
        g[pt[r]] -= grad_scale * (1.0f - eps);
      }
    });
  });
}

}  // namespace vela::ops::cpu
