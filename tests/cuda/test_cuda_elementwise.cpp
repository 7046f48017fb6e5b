// CUDA elementwise ops against their CPU twins: add / mul (same shape and row broadcast), scale,
// cast between float dtypes and same-dtype copies, silu_mul with free row strides. Shapes include
// odd sizes and offset views so both the vector and the scalar paths run.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "ops/cast.h"
#include "ops/elementwise.h"
#include "ops/swiglu.h"

namespace vela {
namespace {

using test::CudaTest;

class CudaElementwiseTest : public CudaTest {};

const Shape kShapes[] = {{1}, {3}, {127}, {4096}, {3, 127}, {5, 4096}, {2, 3, 1000}, {100003}};

TEST_F(CudaElementwiseTest, AddMulScaleMatchCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(test::label(dt, shape));
      Tensor a = test::random_cpu(shape, dt, 1), b = test::random_cpu(shape, dt, 2);
      Tensor bias = test::random_cpu({shape.back()}, dt, 3);
      Tensor da = a.to(gpu()), db = b.to(gpu()), dbias = bias.to(gpu());
      Tensor want = Tensor::empty(shape, dt), got = Tensor::empty(shape, dt, gpu());
      ops::add(a, b, want);
      ops::add(da, db, got);
      test::expect_close(got, want, test::tol_for(dt), "add");
      ops::mul(a, b, want);
      ops::mul(da, db, got);
      test::expect_close(got, want, test::tol_for(dt), "mul");
      ops::add(a, bias, want);
      ops::add(da, dbias, got);
      test::expect_close(got, want, test::tol_for(dt), "add broadcast");
      ops::mul(a, bias, want);
      ops::mul(da, dbias, got);
      test::expect_close(got, want, test::tol_for(dt), "mul broadcast");
      ops::scale(a, -0.37f, want);
      ops::scale(da, -0.37f, got);
      test::expect_close(got, want, test::tol_for(dt), "scale");
      // In place (out aliases a).
      ops::add(a, b, want);
      ops::add(da, db, da);
      test::expect_close(da, want, test::tol_for(dt), "add in place");
    }
  }
}

TEST_F(CudaElementwiseTest, UnalignedViewsTakeTheScalarPath) {
  for (DType dt : test::kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = test::random_cpu({1001}, dt, 4), b = test::random_cpu({1001}, dt, 5);
    // Offset by one element: no longer 16-byte aligned.
    Tensor a1 = a.slice(0, 1, 1001), b1 = b.slice(0, 1, 1001);
    Tensor da1 = a.to(gpu()).slice(0, 1, 1001), db1 = b.to(gpu()).slice(0, 1, 1001);
    Tensor want = Tensor::empty({1000}, dt), got = Tensor::empty({1000}, dt, gpu());
    ops::mul(a1, b1, want);
    ops::mul(da1, db1, got);
    test::expect_close(got, want, test::tol_for(dt), "mul unaligned");
    Tensor got2 = Tensor::empty({1001}, dt, gpu());
    Tensor out1 = got2.slice(0, 1, 1001);
    ops::scale(da1, 3.0f, out1);
    ops::scale(a1, 3.0f, want);
    test::expect_close(out1, want, test::tol_for(dt), "scale unaligned out");
  }
}

TEST_F(CudaElementwiseTest, CastMatchesCpuExactly) {
  for (DType from : test::kFloatDTypes) {
    for (DType to : test::kFloatDTypes) {
      for (int64_t n : {1, 3, 127, 4096, 100003}) {
        SCOPED_TRACE(std::string(dtype_name(from)) + "->" + dtype_name(to) +
                     " n=" + std::to_string(n));
        // Wide range so f16 overflow / subnormals and bf16 rounding all occur.
        Tensor x = test::random_cpu({n}, from, static_cast<uint64_t>(n), -7e4, 7e4);
        if (n > 10) {
          test::set_value(x, 0, 1e-6);               // f16 subnormal
          test::set_value(x, 1, -3e-8);              // rounds to -0 in f16
          test::set_value(x, 2, 1.0 + 1.0 / 512.0);  // a bf16 tie
        }
        Tensor want = Tensor::empty({n}, to), got = Tensor::empty({n}, to, gpu());
        ops::cast(x, want);
        ops::cast(x.to(gpu()), got);
        test::expect_equal(got, want, "cast");
      }
    }
  }
}

TEST_F(CudaElementwiseTest, CastSameDtypeCopiesAnyDtype) {
  for (DType dt : {DType::kI32, DType::kI64, DType::kU8, DType::kBF16}) {
    Tensor x = test::random_ints({333}, dt, 9, 0, 100);
    Tensor got = Tensor::empty({333}, dt, gpu());
    ops::cast(x.to(gpu()), got);
    test::expect_equal(got, x, dtype_name(dt));
  }
}

TEST_F(CudaElementwiseTest, CastCopiesRowStridedColumnBlocks) {
  for (DType dt : {DType::kBF16, DType::kF32}) {
    Tensor fused = test::random_cpu({37, 96}, dt, 13);  // [n, 64 | 16 | 16]
    Tensor dev = fused.to(gpu());
    Tensor k = Tensor::empty({37, 16}, dt, gpu());
    ops::cast(dev.slice(1, 64, 80), k);
    test::expect_equal(k, fused.slice(1, 64, 80).contiguous(), "column block out");
    Tensor back = Tensor::zeros({37, 96}, dt, gpu());
    Tensor back_k = back.slice(1, 64, 80);
    ops::cast(k, back_k);
    Tensor want = Tensor::zeros({37, 96}, dt);
    want.slice(1, 64, 80).copy_(fused.slice(1, 64, 80));
    test::expect_equal(back, want, "column block in");
  }
}

TEST_F(CudaElementwiseTest, SiluMulMatchesCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (auto [rows, inter] :
         {std::pair<int64_t, int64_t>{1, 1}, {3, 127}, {7, 4096}, {2, 11008}, {64, 24}}) {
      SCOPED_TRACE(test::label(dt, {rows, inter}));
      Tensor gate = test::random_cpu({rows, inter}, dt, 11, -6.0, 6.0);
      Tensor up = test::random_cpu({rows, inter}, dt, 12);
      Tensor want = Tensor::empty({rows, inter}, dt), got = Tensor::empty({rows, inter}, dt, gpu());
      ops::silu_mul(gate, up, want);
      ops::silu_mul(gate.to(gpu()), up.to(gpu()), got);
      test::expect_close(got, want, test::tol_for(dt), "silu_mul");

      // Fused projection: [rows, 2 * inter] = [gate | up], row stride 2 * inter.
      Tensor fused = test::random_cpu({rows, 2 * inter}, dt, 13, -6.0, 6.0);
      Tensor dfused = fused.to(gpu());
      ops::silu_and_mul(fused, want);
      ops::silu_and_mul(dfused, got);
      test::expect_close(got, want, test::tol_for(dt), "silu_and_mul");
      ops::silu_mul(fused.slice(1, 0, inter), fused.slice(1, inter, 2 * inter), want);
      ops::silu_mul(dfused.slice(1, 0, inter), dfused.slice(1, inter, 2 * inter), got);
      test::expect_close(got, want, test::tol_for(dt), "silu_mul strided rows");
    }
  }
}

}  // namespace
}  // namespace vela
