// softmax / log_softmax: shape, dtype, row-layout and device checks, then dispatch.
#include "ops/softmax.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

namespace {

void check_softmax(const char* op, const Tensor& x, const Tensor& out) {
  check_defined(op, "x", x);
  check_defined(op, "out", out);
  check_min_rank(op, "x", x, 1);
  check_floating(op, "x", x);
  VELA_CHECK(out.dtype() == DType::kF32 || out.dtype() == x.dtype(), op, ": out ", out.str(),
             " must be f32 or the dtype of x ", x.str());
  check_same_shape(op, "out", out, "x", x);
  check_same_device(op, "out", out, "x", x);
  check_rows(op, "x", x);
  check_out_rows(op, "out", out);
}

}  // namespace

void softmax(const Tensor& x, Tensor& out) {
  check_softmax("softmax", x, out);
  VELA_DISPATCH(x.device(), softmax, x, out);
}

void log_softmax(const Tensor& x, Tensor& out) {
  check_softmax("log_softmax", x, out);
  VELA_DISPATCH(x.device(), log_softmax, x, out);
}

}  // namespace vela::ops
