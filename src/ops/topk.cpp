// argmax / topk: shape, dtype, row-layout and device checks, then dispatch.
#include "ops/topk.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

namespace {

void check_x(const char* op, const Tensor& x) {
  check_defined(op, "x", x);
  check_rank(op, "x", x, 2);
  check_floating(op, "x", x);
  check_rows(op, "x", x);
  VELA_CHECK(x.size(1) >= 1, op, ": x ", x.str(), " must have at least one column");
}

}  // namespace

void argmax(const Tensor& x, Tensor& out) {
  const char* op = "argmax";
  check_x(op, x);
  check_defined(op, "out", out);
  check_dtype(op, "out", out, DType::kI32);
  check_shape(op, "out", out, Shape{x.size(0)});
  check_contiguous(op, "out", out);
  check_same_device(op, "out", out, "x", x);
  VELA_DISPATCH(x.device(), argmax, x, out);
}

void topk(const Tensor& x, int64_t k, Tensor& values, Tensor& indices) {
  const char* op = "topk";
  check_x(op, x);
  check_defined(op, "values", values);
  check_defined(op, "indices", indices);
  VELA_CHECK(k >= 1 && k <= x.size(1), "topk: k = ", k, " must be in [1, ", x.size(1), "] for x ",
             x.str());
  check_dtype(op, "values", values, DType::kF32);
  check_dtype(op, "indices", indices, DType::kI32);
  check_shape(op, "values", values, Shape{x.size(0), k});
  check_shape(op, "indices", indices, Shape{x.size(0), k});
  check_out_rows(op, "values", values);
  check_out_rows(op, "indices", indices);
  check_same_device(op, "values", values, "x", x);
  check_same_device(op, "indices", indices, "x", x);
  VELA_DISPATCH(x.device(), topk, x, k, values, indices);
}

}  // namespace vela::ops
