// Helpers for the op tests (and, through cuda/cuda_test_util.h, the CUDA tests): seeded random
// tensors of any floating dtype, tensors read back as doubles (any device, any strides), the
// rounding error of each dtype, and a closeness check that prints the
// max abs error and the worst element on failure.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/optim.h"

namespace vela::test {

inline const DType kFloatDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// Unit roundoff of a floating dtype (half an ulp at 1).
inline double dtype_eps(DType dt) {
  switch (dt) {
    case DType::kBF16:
      return 1.0 / 256.0;
    case DType::kF16:
      return 1.0 / 2048.0;
    default:
      return 6e-8;
  }
}

// Stores v (f32) into element i of a contiguous CPU tensor of a floating dtype.
inline void set_f32(Tensor& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::kF32:
      static_cast<float*>(t.data_ptr())[i] = v;
      break;
    case DType::kBF16:
      static_cast<bf16*>(t.data_ptr())[i] = bf16(v);
      break;
    case DType::kF16:
      static_cast<f16*>(t.data_ptr())[i] = f16(v);
      break;
    default:
      FAIL() << "set_f32 on " << t.str();
  }
}

// A contiguous CPU tensor with values uniform in [lo, hi), rounded to dt.
inline Tensor random_tensor(const Shape& shape, DType dt, uint64_t seed, float lo = -1.0f,
                            float hi = 1.0f) {
  Tensor t = Tensor::empty(shape, dt);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) set_f32(t, i, dist(gen));
  return t;
}

// A contiguous CPU tensor from f32 values, rounded to dt.
inline Tensor tensor_of(const std::vector<float>& values, const Shape& shape, DType dt) {
  Tensor t = Tensor::empty(shape, dt);
  for (size_t i = 0; i < values.size(); ++i) set_f32(t, static_cast<int64_t>(i), values[i]);
  return t;
}

// Every element of t (any device, any strides, any dtype) as double, in logical row-major order.
inline std::vector<double> to_doubles(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<double> out(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i) {
    const void* p = c.data_ptr();
    double v = 0.0;
    switch (c.dtype()) {
      case DType::kF32:
        v = static_cast<const float*>(p)[i];
        break;
      case DType::kBF16:
        v = static_cast<float>(static_cast<const bf16*>(p)[i]);
        break;
      case DType::kF16:
        v = static_cast<float>(static_cast<const f16*>(p)[i]);
        break;
      case DType::kI32:
        v = static_cast<const int32_t*>(p)[i];
        break;
      case DType::kI64:
        v = static_cast<double>(static_cast<const int64_t*>(p)[i]);
        break;
      case DType::kU8:
        v = static_cast<const uint8_t*>(p)[i];
        break;
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

// Checks |got - want| <= atol + rtol * |want| elementwise (NaN must match NaN); on failure prints
// the max abs error, the number of bad elements and the worst one.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_err = 0.0;
  size_t n_bad = 0, worst = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) || std::isnan(got[i])) {
      if (std::isnan(want[i]) != std::isnan(got[i])) {
        ++n_bad;
        worst = i;
        worst_excess = INFINITY;
      }
      continue;
    }
    if (std::isinf(want[i]) && got[i] == want[i]) continue;
    double err = std::fabs(got[i] - want[i]);
    max_err = std::max(max_err, err);
    double excess = err - (atol + rtol * std::fabs(want[i]));
    if (excess > 0) {
      ++n_bad;
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = i;
      }
    }
  }
  EXPECT_EQ(n_bad, 0u) << what << ": max abs error " << max_err << " (atol " << atol << ", rtol "
                       << rtol << "); " << n_bad << " of " << got.size()
                       << " elements out of tolerance, worst at " << worst << ": got "
                       << (got.empty() ? 0.0 : got[worst]) << " want "
                       << (want.empty() ? 0.0 : want[worst]);
}

// Checks |got[i] - want[i]| <= bound[i] (NaN must match NaN), printing the max abs error.
inline void expect_within(const std::vector<double>& got, const std::vector<double>& want,
                          const std::vector<double>& bound, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(bound.size(), want.size()) << what;
  double max_err = 0.0;
  size_t n_bad = 0, first_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool bad;
    if (std::isnan(want[i]) || std::isnan(got[i])) {
      bad = std::isnan(want[i]) != std::isnan(got[i]);
    } else {
      double err = std::fabs(got[i] - want[i]);
      max_err = std::max(max_err, err);
      bad = err > bound[i];
    }
    if (bad && n_bad++ == 0) first_bad = i;
  }
  EXPECT_EQ(n_bad, 0u) << what << ": max abs error " << max_err << "; " << n_bad << " of "
                       << got.size() << " elements out of tolerance, first at " << first_bad
                       << ": got " << (n_bad ? got[first_bad] : 0.0) << " want "
                       << (n_bad ? want[first_bad] : 0.0) << " bound "
                       << (n_bad ? bound[first_bad] : 0.0);
}

// Whether a and b (any devices, any strides) hold the same bytes in logical order.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor ha = a.to(Device::cpu()).contiguous(), hb = b.to(Device::cpu()).contiguous();
  return ha.nbytes() == hb.nbytes() && std::memcmp(ha.data_ptr(), hb.data_ptr(), ha.nbytes()) == 0;
}

// AdamW's per-step constants at step t (b1 0.9, b2 0.95, eps 1e-8; weight decay 0.1 when
// `decays`), as the optimizer computes them.
inline ops::AdamWHyper adamw_hyper(int t, double lr, bool decays) {
  ops::AdamWHyper h;
  h.b1 = 0.9f;
  h.b2 = 0.95f;
  h.step_size = static_cast<float>(lr / (1.0 - std::pow(0.9, t)));
  h.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(0.95, t)));
  h.eps = 1e-8f;
  h.decay = decays ? static_cast<float>(1.0 - lr * 0.1) : 1.0f;
  return h;
}

// A random [rows, cols] view into a wider [rows, cols + pad] tensor (row stride cols + pad).
inline Tensor strided_rows(int64_t rows, int64_t cols, int64_t pad, DType dt, uint64_t seed) {
  Tensor wide = random_tensor({rows, cols + pad}, dt, seed);
  return wide.slice(1, 0, cols);
}

}  // namespace vela::test
