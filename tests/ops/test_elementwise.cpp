// add / mul / scale against a double reference for f32 / bf16 / f16, same-shape and row-broadcast
// b, in-place output, and the InvalidArgument paths.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "ops/elementwise.h"
#include "ops/op_test_util.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

const Shape kShapes[] = {{1}, {3}, {7, 127}, {33, 4096}, {2, 3, 5}};

void check_binary(const std::function<void(const Tensor&, const Tensor&, Tensor&)>& op,
                  const std::function<double(double, double)>& ref, const char* name) {
  uint64_t seed = 10;
  for (DType dt : test::kFloatDTypes) {
    for (const Shape& shape : kShapes) {
      for (bool broadcast : {false, true}) {
        Tensor a = random_tensor(shape, dt, seed++);
        Shape bs = broadcast ? Shape{shape.back()} : shape;
        Tensor b = random_tensor(bs, dt, seed++);
        std::vector<double> va = to_doubles(a), vb = to_doubles(b), want(va.size());
        for (size_t i = 0; i < va.size(); ++i) want[i] = ref(va[i], vb[i % vb.size()]);
        Tensor out = Tensor::empty(shape, dt);
        op(a, b, out);
        std::string what = std::string(name) + " " + a.str() + " " + b.str();
        test::expect_close(to_doubles(out), want, 1e-7, test::dtype_eps(dt), what);
        op(a, b, a);  // in place
        test::expect_close(to_doubles(a), want, 1e-7, test::dtype_eps(dt), what + " in place");
      }
    }
  }
}

TEST(Elementwise, Add) {
  check_binary([](const Tensor& a, const Tensor& b, Tensor& o) { ops::add(a, b, o); },
               [](double x, double y) { return x + y; }, "add");
}

TEST(Elementwise, Mul) {
  check_binary([](const Tensor& a, const Tensor& b, Tensor& o) { ops::mul(a, b, o); },
               [](double x, double y) { return x * y; }, "mul");
}

TEST(Elementwise, Scale) {
  uint64_t seed = 50;
  for (DType dt : test::kFloatDTypes) {
    for (const Shape& shape : kShapes) {
      Tensor x = random_tensor(shape, dt, seed++);
      std::vector<double> want = to_doubles(x);
      for (double& v : want) v *= -0.37f;
      Tensor out = Tensor::empty(shape, dt);
      ops::scale(x, -0.37f, out);
      test::expect_close(to_doubles(out), want, 1e-7, test::dtype_eps(dt), "scale " + x.str());
    }
  }
}

TEST(Elementwise, InvalidArguments) {
  Tensor a = random_tensor({7, 5}, DType::kF32, 1);
  Tensor out = Tensor::empty({7, 5}, DType::kF32);
  EXPECT_THROW(ops::add(a, random_tensor({7, 4}, DType::kF32, 2), out), InvalidArgument);
  EXPECT_THROW(ops::add(a, random_tensor({4}, DType::kF32, 2), out), InvalidArgument);
  EXPECT_THROW(ops::mul(a, random_tensor({7, 5}, DType::kBF16, 3), out), InvalidArgument);
  Tensor out_bad = Tensor::empty({5, 7}, DType::kF32);
  EXPECT_THROW(ops::add(a, a, out_bad), InvalidArgument);
  Tensor out16 = Tensor::empty({7, 5}, DType::kF16);
  EXPECT_THROW(ops::scale(a, 2.0f, out16), InvalidArgument);
  Tensor at = random_tensor({5, 7}, DType::kF32, 4).transpose(0, 1);
  EXPECT_THROW(ops::add(at, a, out), InvalidArgument);
  Tensor ai = Tensor::zeros({7, 5}, DType::kI32);
  EXPECT_THROW(ops::add(ai, ai, ai), InvalidArgument);
}

}  // namespace
}  // namespace vela
