// CPU softmax / log_softmax over the last dim: fp32 with max subtraction, vectorized exp, the sum
// accumulated in double; parallel over rows.
#include <cmath>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {

template <typename T, typename TO, bool kLog>
void softmax_typed(const Tensor& x, Tensor& out) {
  RowLayout rx = rows_of(x), ro = rows_of(out);
  const int64_t n = rx.n_cols;
  if (n == 0) return;
  const T* px = static_cast<const T*>(x.data_ptr());
  TO* po = static_cast<TO*>(out.data_ptr());
  parallel_for(rx.n_rows, std::max<int64_t>(1, 16384 / n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xf = row_as_f32(px + r * rx.row_stride, n, 0);
      TO* orow = po + r * ro.row_stride;
      float m = max_of(xf, n);
      // Exps go straight into an f32 output row (softmax), else into scratch.
      float* e;
      if constexpr (std::is_same_v<TO, float> && !kLog) {
        e = orow;
      } else {
        e = scratch(static_cast<size_t>(n), 1);
      }
      double sum = exp_shift_sum(xf, e, n, m);
      if constexpr (kLog) {
        float log_sum = static_cast<float>(std::log(sum));
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) e[i] = (xf[i] - m) - log_sum;
      } else {
        float inv = static_cast<float>(1.0 / sum);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) e[i] *= inv;
      }
      if constexpr (!std::is_same_v<TO, float> || kLog) store_f32(e, orow, n);
    }
  });
}

template <bool kLog>
void softmax_any(const Tensor& x, Tensor& out) {
  visit_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (out.dtype() == DType::kF32) {
      softmax_typed<T, float, kLog>(x, out);
    } else {
      softmax_typed<T, T, kLog>(x, out);
    }
  });
}

}  // namespace

void softmax(const Tensor& x, Tensor& out) { softmax_any<false>(x, out); }
void log_softmax(const Tensor& x, Tensor& out) { softmax_any<true>(x, out); }

}  // namespace vela::ops::cpu
