// rms_norm / add_rms_norm against a double reference: odd row counts and hidden sizes, f32 / bf16
// / f16 with f32 or same-dtype weights, leading dims, strided rows, the residual update, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/op_test_util.h"
#include "ops/rms_norm.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

std::vector<double> rms_ref(const std::vector<double>& x, const std::vector<double>& w,
                            int64_t hidden, double eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / hidden; ++r) {
    double ss = 0.0;
    for (int64_t i = 0; i < hidden; ++i) ss += x[r * hidden + i] * x[r * hidden + i];
    double inv = 1.0 / std::sqrt(ss / hidden + eps);
    for (int64_t i = 0; i < hidden; ++i) out[r * hidden + i] = x[r * hidden + i] * inv * w[i];
  }
  return out;
}

double tol(DType dt) { return 2.0 * test::dtype_eps(dt) + 2e-6; }

TEST(RmsNorm, MatchesReference) {
  uint64_t seed = 1;
  for (DType dt : test::kFloatDTypes) {
    for (DType wdt : {DType::kF32, dt}) {
      for (int64_t rows : {1, 7, 33}) {
        for (int64_t hidden : {1, 3, 127, 4096}) {
          Tensor x = random_tensor({rows, hidden}, dt, seed++, -2.0f, 2.0f);
          Tensor w = random_tensor({hidden}, wdt, seed++, 0.5f, 1.5f);
          Tensor out = Tensor::empty({rows, hidden}, dt);
          ops::rms_norm(x, w, 1e-5f, out);
          test::expect_close(to_doubles(out), rms_ref(to_doubles(x), to_doubles(w), hidden, 1e-5),
                             1e-6, tol(dt), "rms_norm " + x.str() + " w " + w.str());
        }
      }
    }
  }
}

TEST(RmsNorm, LeadingDimsStridedRowsAndInPlace) {
  for (DType dt : test::kFloatDTypes) {
    Tensor x3 = random_tensor({2, 3, 65}, dt, 100);
    Tensor w = random_tensor({65}, DType::kF32, 101);
    Tensor out3 = Tensor::empty({2, 3, 65}, dt);
    ops::rms_norm(x3, w, 1e-6f, out3);
    std::vector<double> want = rms_ref(to_doubles(x3), to_doubles(w), 65, 1e-6);
    test::expect_close(to_doubles(out3), want, 1e-6, tol(dt), "rms_norm 3-D");
    // Rows of a wider matrix, written into rows of another wider matrix.
    Tensor xs = test::strided_rows(6, 65, 7, dt, 102);
    Tensor wide_out = Tensor::zeros({6, 80}, dt);
    Tensor outs = wide_out.slice(1, 0, 65);
    ops::rms_norm(xs, w, 1e-6f, outs);
    test::expect_close(to_doubles(outs), rms_ref(to_doubles(xs), to_doubles(w), 65, 1e-6), 1e-6,
                       tol(dt), "rms_norm strided");
    std::vector<double> pad = to_doubles(wide_out.slice(1, 65, 80));
    EXPECT_EQ(pad, std::vector<double>(pad.size(), 0.0)) << "rms_norm wrote past its rows";
    // In place.
    ops::rms_norm(x3, w, 1e-6f, x3);
    test::expect_close(to_doubles(x3), want, 1e-6, tol(dt), "rms_norm in place");
  }
}

TEST(AddRmsNorm, UpdatesResidualAndNormalizesIt) {
  uint64_t seed = 200;
  for (DType dt : test::kFloatDTypes) {
    for (int64_t rows : {1, 7, 33}) {
      for (int64_t hidden : {3, 127, 4096}) {
        Tensor x = random_tensor({rows, hidden}, dt, seed++);
        Tensor residual = random_tensor({rows, hidden}, dt, seed++, -3.0f, 3.0f);
        Tensor w = random_tensor({hidden}, dt, seed++, 0.5f, 1.5f);
        std::vector<double> vx = to_doubles(x), vr = to_doubles(residual);
        for (size_t i = 0; i < vr.size(); ++i) vr[i] += vx[i];
        Tensor out = Tensor::empty({rows, hidden}, dt);
        ops::add_rms_norm(x, residual, w, 1e-5f, out);
        std::string what = "add_rms_norm " + x.str();
        std::vector<double> got_res = to_doubles(residual);
        test::expect_close(got_res, vr, 1e-7, test::dtype_eps(dt), what + " residual");
        // The output normalizes the residual as stored.
        test::expect_close(to_doubles(out), rms_ref(got_res, to_doubles(w), hidden, 1e-5), 1e-6,
                           tol(dt), what + " out");
      }
    }
  }
}

TEST(RmsNorm, InvalidArguments) {
  Tensor x = random_tensor({4, 8}, DType::kBF16, 1);
  Tensor out = Tensor::empty({4, 8}, DType::kBF16);
  EXPECT_THROW(ops::rms_norm(x, random_tensor({7}, DType::kBF16, 2), 1e-5f, out), InvalidArgument);
  EXPECT_THROW(ops::rms_norm(x, random_tensor({8}, DType::kF16, 2), 1e-5f, out), InvalidArgument);
  EXPECT_THROW(ops::rms_norm(x, random_tensor({1, 8}, DType::kBF16, 2), 1e-5f, out),
               InvalidArgument);
  Tensor w = random_tensor({8}, DType::kF32, 3);
  Tensor out32 = Tensor::empty({4, 8}, DType::kF32);
  EXPECT_THROW(ops::rms_norm(x, w, 1e-5f, out32), InvalidArgument);
  Tensor out_bad = Tensor::empty({8, 4}, DType::kBF16);
  EXPECT_THROW(ops::rms_norm(x, w, 1e-5f, out_bad), InvalidArgument);
  Tensor xt = random_tensor({8, 4}, DType::kBF16, 4).transpose(0, 1);
  EXPECT_THROW(ops::rms_norm(xt, w, 1e-5f, out), InvalidArgument);
  Tensor res_bad = random_tensor({4, 8}, DType::kF32, 5);
  EXPECT_THROW(ops::add_rms_norm(x, res_bad, w, 1e-5f, out), InvalidArgument);
  Tensor res_shape = random_tensor({4, 9}, DType::kBF16, 6);
  EXPECT_THROW(ops::add_rms_norm(x, res_shape, w, 1e-5f, out), InvalidArgument);
}

}  // namespace
}  // namespace vela
