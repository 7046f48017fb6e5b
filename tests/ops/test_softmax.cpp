// softmax / log_softmax against a double reference: odd shapes, f32 / bf16 / f16 input with f32 or
// same-dtype output, large offsets (max subtraction), -inf entries, leading dims, strided rows,
// and the InvalidArgument paths; the CPU kernels' vector exp (this build's ISA) against std::exp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/cpu/vec.h"
#include "ops/op_test_util.h"
#include "ops/softmax.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

std::vector<double> softmax_ref(const std::vector<double>& x, int64_t n_cols, bool log) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / n_cols; ++r) {
    const double* row = x.data() + r * n_cols;
    double m = -INFINITY, s = 0.0;
    for (int64_t i = 0; i < n_cols; ++i) m = std::max(m, row[i]);
    for (int64_t i = 0; i < n_cols; ++i) s += std::exp(row[i] - m);
    for (int64_t i = 0; i < n_cols; ++i)
      out[r * n_cols + i] = log ? row[i] - m - std::log(s) : std::exp(row[i] - m) / s;
  }
  return out;
}

void check(const Tensor& x, DType out_dt, bool log, const std::string& what) {
  Tensor out = Tensor::empty(x.shape(), out_dt);
  log ? ops::log_softmax(x, out) : ops::softmax(x, out);
  double rtol = 2.0 * test::dtype_eps(out_dt) + 2e-6;
  double atol = log ? 2e-5 : 1e-7;
  test::expect_close(
      to_doubles(out), softmax_ref(to_doubles(x), x.size(-1), log), atol, rtol,
      (log ? "log_softmax " : "softmax ") + x.str() + " -> " + out.str() + " " + what);
}

TEST(Softmax, MatchesReference) {
  uint64_t seed = 1;
  for (DType dt : test::kFloatDTypes) {
    for (DType out_dt : {DType::kF32, dt}) {
      if (dt == DType::kF32 && out_dt != DType::kF32) continue;
      for (int64_t rows : {1, 7, 33}) {
        for (int64_t cols : {1, 3, 127, 4096}) {
          Tensor x = random_tensor({rows, cols}, dt, seed++, -10.0f, 10.0f);
          check(x, out_dt, false, "");
          check(x, out_dt, true, "");
        }
      }
    }
  }
}

TEST(Softmax, LargeOffsetsAndMaskedEntries) {
  for (DType dt : test::kFloatDTypes) {
    Tensor x = random_tensor({5, 300}, dt, 40, 990.0f, 1010.0f);
    check(x, DType::kF32, false, "offset 1000");
    check(x, DType::kF32, true, "offset 1000");
    Tensor m = random_tensor({3, 70}, dt, 41, -5.0f, 5.0f);
    for (int64_t i = 0; i < m.numel(); i += 3) test::set_f32(m, i, -INFINITY);
    check(m, DType::kF32, false, "masked");
    check(m, dt, false, "masked");
  }
}

TEST(Softmax, LeadingDimsStridedRowsAndInPlace) {
  Tensor x = random_tensor({2, 3, 129}, DType::kBF16, 50, -4.0f, 4.0f);
  check(x, DType::kF32, false, "3-D");
  check(x, DType::kBF16, true, "3-D");
  Tensor xs = test::strided_rows(7, 65, 3, DType::kF32, 51);
  check(xs, DType::kF32, false, "strided");
  Tensor y = random_tensor({4, 100}, DType::kF32, 52);
  std::vector<double> want = softmax_ref(to_doubles(y), 100, false);
  ops::softmax(y, y);
  test::expect_close(to_doubles(y), want, 1e-7, 2e-6, "softmax in place");
}

// exp_shift_sum (ops/cpu/vec.h: the AVX-512 or AVX2 exp, whichever this build targets, else
// std::exp) over exp's whole float range and its edges: within 2 ulp of std::exp where the result
// is normal, within one subnormal step below, inf / 0 / NaN where std::exp gives them, and the sum
// in double.
TEST(Softmax, VectorExpMatchesStdExpOverItsRange) {
  std::vector<float> x;
  for (float v = -110.0f; v < 95.0f; v += 0.0137f) x.push_back(v);
  for (float v : {-INFINITY, INFINITY, NAN, 88.72f, 88.73f, 89.0f, -87.3f, -103.9f, -104.0f, 0.0f,
                  -0.0f, 1e-8f, -1e-8f})
    x.push_back(v);
  std::vector<float> y(x.size());
  const double total =
      ops::cpu::exp_shift_sum(x.data(), y.data(), static_cast<int64_t>(x.size()), 0.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i]);
    if (std::isnan(want) || std::isinf(want) || want == 0.0f) {
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(y[i])) << "exp(" << x[i] << ")";
      else if (std::isinf(want))
        EXPECT_EQ(y[i], want) << "exp(" << x[i] << ")";
      else
        EXPECT_LE(y[i], 1.5e-45f) << "exp(" << x[i] << ")";
    } else if (want >= 1.18e-38f) {
      EXPECT_NEAR(y[i] / want, 1.0f, 2.5e-7f) << "exp(" << x[i] << ")";
    } else {
      EXPECT_NEAR(y[i], want, 1.5e-45f) << "exp(" << x[i] << ") (subnormal)";
    }
  }
  // The NaN and +inf entries make the whole sum NaN; the finite part's sum in double.
  EXPECT_TRUE(std::isnan(total));
  std::vector<float> fin(x.begin(), x.begin() + 1000);  // -110 .. -96.3: tiny, then check larger
  for (float v = -20.0f; v < 20.0f; v += 0.37f) fin.push_back(v);
  std::vector<float> e(fin.size());
  const double s =
      ops::cpu::exp_shift_sum(fin.data(), e.data(), static_cast<int64_t>(fin.size()), 3.0f);
  double want_s = 0.0;
  for (float v : fin) want_s += std::exp(static_cast<double>(v) - 3.0);
  EXPECT_NEAR(s / want_s, 1.0, 1e-6);
}

TEST(Softmax, InvalidArguments) {
  Tensor x = random_tensor({4, 8}, DType::kBF16, 1);
  Tensor out_shape = Tensor::empty({4, 7}, DType::kF32);
  EXPECT_THROW(ops::softmax(x, out_shape), InvalidArgument);
  Tensor out16 = Tensor::empty({4, 8}, DType::kF16);
  EXPECT_THROW(ops::log_softmax(x, out16), InvalidArgument);
  Tensor xi = Tensor::zeros({4, 8}, DType::kI32);
  Tensor out = Tensor::empty({4, 8}, DType::kF32);
  EXPECT_THROW(ops::softmax(xi, out), InvalidArgument);
  Tensor xt = random_tensor({8, 4}, DType::kF32, 2).transpose(0, 1);
  EXPECT_THROW(ops::softmax(xt, out), InvalidArgument);
}

}  // namespace
}  // namespace vela
