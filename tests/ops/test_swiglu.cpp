// silu_mul / silu_and_mul against a double reference: odd shapes, f32 / bf16 / f16, gate and up as
// strided halves of one fused tensor, large-magnitude inputs, and the InvalidArgument paths.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/op_test_util.h"
#include "ops/swiglu.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

std::vector<double> silu_mul_ref(const std::vector<double>& g, const std::vector<double>& u) {
  std::vector<double> out(g.size());
  for (size_t i = 0; i < g.size(); ++i) out[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return out;
}

double tol(DType dt) { return 2.0 * test::dtype_eps(dt) + 2e-6; }

TEST(SiluMul, MatchesReference) {
  uint64_t seed = 1;
  for (DType dt : test::kFloatDTypes) {
    for (int64_t rows : {1, 7, 33}) {
      for (int64_t inter : {1, 3, 127, 4096}) {
        Tensor g = random_tensor({rows, inter}, dt, seed++, -12.0f, 12.0f);
        Tensor u = random_tensor({rows, inter}, dt, seed++, -2.0f, 2.0f);
        Tensor out = Tensor::empty({rows, inter}, dt);
        ops::silu_mul(g, u, out);
        test::expect_close(to_doubles(out), silu_mul_ref(to_doubles(g), to_doubles(u)), 1e-6,
                           tol(dt), "silu_mul " + g.str());
      }
    }
  }
}

TEST(SiluMul, ExtremeInputs) {
  std::vector<float> gv = {-100.0f, -88.0f, -30.0f, -1e-3f, 0.0f, 1e-3f, 30.0f, 88.0f, 100.0f,
                           -50.0f,  50.0f,  3.0f,   -3.0f,  7.0f, -7.0f, 0.5f,  -0.5f};
  std::vector<float> uv(gv.size(), 1.5f);
  Tensor g = Tensor::from_vector(gv), u = Tensor::from_vector(uv);
  Tensor out = Tensor::empty({static_cast<int64_t>(gv.size())}, DType::kF32);
  ops::silu_mul(g, u, out);
  test::expect_close(to_doubles(out), silu_mul_ref(to_doubles(g), to_doubles(u)), 1e-30, 1e-6,
                     "silu_mul extremes");
}

TEST(SiluMul, HalvesOfAFusedProjection) {
  uint64_t seed = 100;
  for (DType dt : test::kFloatDTypes) {
    for (int64_t inter : {1, 127, 4096}) {
      Tensor x = random_tensor({7, 2 * inter}, dt, seed++, -6.0f, 6.0f);
      Tensor gate = x.slice(1, 0, inter), up = x.slice(1, inter, 2 * inter);
      std::vector<double> want = silu_mul_ref(to_doubles(gate), to_doubles(up));
      Tensor out = Tensor::empty({7, inter}, dt);
      ops::silu_mul(gate, up, out);
      test::expect_close(to_doubles(out), want, 1e-6, tol(dt), "silu_mul halves " + x.str());
      Tensor out2 = Tensor::empty({7, inter}, dt);
      ops::silu_and_mul(x, out2);
      test::expect_close(to_doubles(out2), want, 1e-6, tol(dt), "silu_and_mul " + x.str());
    }
  }
}

TEST(SiluMul, InvalidArguments) {
  Tensor g = random_tensor({4, 8}, DType::kF32, 1);
  Tensor out = Tensor::empty({4, 8}, DType::kF32);
  EXPECT_THROW(ops::silu_mul(g, random_tensor({4, 7}, DType::kF32, 2), out), InvalidArgument);
  EXPECT_THROW(ops::silu_mul(g, random_tensor({4, 8}, DType::kBF16, 2), out), InvalidArgument);
  Tensor out_bad = Tensor::empty({4, 7}, DType::kF32);
  EXPECT_THROW(ops::silu_mul(g, g, out_bad), InvalidArgument);
  Tensor gt = random_tensor({8, 4}, DType::kF32, 3).transpose(0, 1);
  EXPECT_THROW(ops::silu_mul(gt, g, out), InvalidArgument);
  EXPECT_THROW(ops::silu_and_mul(random_tensor({4, 7}, DType::kF32, 4), out), InvalidArgument);
  EXPECT_THROW(ops::silu_and_mul(random_tensor({4, 16}, DType::kF32, 4), out_bad), InvalidArgument);
}

}  // namespace
}  // namespace vela
