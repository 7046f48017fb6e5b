// Finite-difference gradient checks for the backward tests: central differences
// (L(x + h) - L(x - h)) / 2h of a scalar loss evaluated in double, compared elementwise with the
// analytic gradient (|analytic - numeric| <= atol + rtol * |numeric|), printing the max error.
// With `richardson`, the estimate is (4 D(h/2) - D(h)) / 3, whose truncation error is O(h^4)
// instead of O(h^2): a loss with a large value (so f32 forward rounding of ~1e-7 |L| swamps a
// small step) can then be checked with a step big enough for that noise to vanish.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vela::test {

// sum(out * weights) in double; out any f32 CPU tensor, weights the same numel.
inline double weighted_sum(const Tensor& out, const std::vector<float>& weights) {
  std::vector<float> v = out.to_vector<float>();
  double s = 0.0;
  for (size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * weights[i];
  return s;
}

// Checks `analytic` (f32, x's shape) against central differences of `loss` w.r.t. the contiguous
// f32 CPU tensor x (perturbed in place, restored). `stride` > 1 checks every stride-th element.
inline void expect_grad_fd(Tensor& x, const Tensor& analytic, const std::function<double()>& loss,
                           const std::string& what, double h = 1e-2, double atol = 2e-3,
                           double rtol = 1e-2, int64_t stride = 1, bool richardson = false) {
  ASSERT_TRUE(x.is_contiguous() && x.dtype() == DType::kF32) << what;
  ASSERT_EQ(x.numel(), analytic.numel()) << what;
  std::vector<float> a = analytic.to_vector<float>();
  float* p = x.data<float>();
  double max_err = 0.0, worst_num = 0.0, worst_ana = 0.0, max_ratio = 0.0;
  int64_t n_bad = 0, worst = -1, n_checked = 0;
  for (int64_t i = 0; i < x.numel(); i += stride) {
    const float orig = p[i];
    auto central = [&](double step_h) {
      p[i] = orig + static_cast<float>(step_h);
      const double lp = loss();
      p[i] = orig - static_cast<float>(step_h);
      const double lm = loss();
      p[i] = orig;
      // The perturbation actually applied (f32 rounding of orig +- h).
      const double step = static_cast<double>(orig + static_cast<float>(step_h)) -
                          static_cast<double>(orig - static_cast<float>(step_h));
      return (lp - lm) / step;
    };
    const double num = richardson ? (4.0 * central(h / 2) - central(h)) / 3.0 : central(h);
    const double err = std::fabs(num - a[static_cast<size_t>(i)]);
    ++n_checked;
    if (err > max_err) max_err = err;
    max_ratio = std::max(max_ratio, err / (atol + rtol * std::fabs(num)));
    if (err > atol + rtol * std::fabs(num)) {
      if (worst < 0 || err > std::fabs(worst_num - worst_ana)) {
        worst = i;
        worst_num = num;
        worst_ana = a[static_cast<size_t>(i)];
      }
      ++n_bad;
    }
  }
  EXPECT_EQ(n_bad, 0) << what << ": " << n_bad << " of " << n_checked
                      << " elements off; max abs error " << max_err << " (atol " << atol
                      << ", rtol " << rtol << "), worst at " << worst << ": analytic " << worst_ana
                      << " numeric " << worst_num;
  testing::Test::RecordProperty(what + "_max_abs_err", std::to_string(max_err));
  // How much of the tolerance the worst element used (1 = at the limit).
  testing::Test::RecordProperty(what + "_tolerance_used", std::to_string(max_ratio));
}

}  // namespace vela::test
