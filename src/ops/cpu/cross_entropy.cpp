// CPU cross_entropy per row: log-sum-exp with max subtraction (sum in double), then torch's
// label-smoothed loss (1 - eps) * (lse - x_t) + eps * (lse - mean_j x_j); 0 for ignored rows.
#include <cmath>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {

template <typename T>
void cross_entropy_typed(const Tensor& logits, const Tensor& targets, Tensor& losses,
                         int32_t ignore_index, float label_smoothing) {
  RowLayout rx = rows_of(logits);
  const int64_t n = rx.n_cols;
  const T* px = static_cast<const T*>(logits.data_ptr());
  const int32_t* pt = targets.data<int32_t>();
  float* pl = losses.data<float>();
  const double eps = label_smoothing;
  parallel_for(rx.n_rows, std::max<int64_t>(1, 16384 / n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (pt[r] == ignore_index) {
        pl[r] = 0.0f;
        continue;
      }
      const float* xf = row_as_f32(px + r * rx.row_stride, n, 0);
      float m = max_of(xf, n);
      double sum = exp_shift_sum(xf, scratch(static_cast<size_t>(n), 1), n, m);
      double lse = static_cast<double>(m) + std::log(sum);
      double loss = lse - static_cast<double>(xf[pt[r]]);
      if (eps != 0.0) {
        double mean = sum_of(xf, n) / static_cast<double>(n);
        loss = (1.0 - eps) * loss + eps * (lse - mean);
      }
      pl[r] = static_cast<float>(loss);
    }
  });
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                   int32_t ignore_index, float label_smoothing) {
  visit_float(logits.dtype(), [&](auto tag) {
    cross_entropy_typed<typename decltype(tag)::type>(logits, targets, losses, ignore_index,
                                                      label_smoothing);
  });
}

}  // namespace vela::ops::cpu
