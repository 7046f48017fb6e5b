// silu_and_mul_backward: checks, then dispatch.
#include "ops/backward_dispatch.h"
#include "ops/checks.h"
#include "ops/swiglu.h"

namespace vela::ops {

void silu_and_mul_backward(const Tensor& x, const Tensor& dout, Tensor& dx) {
  const char* op = "silu_and_mul_backward";
  check_defined(op, "x", x);
  check_defined(op, "dout", dout);
  check_defined(op, "dx", dx);
  check_min_rank(op, "x", x, 1);
  check_floating(op, "x", x);
  if (x.is_cpu()) check_dtype(op, "x", x, DType::kF32);
  check_same_dtype(op, "dout", dout, "x", x);
  check_same_dtype(op, "dx", dx, "x", x);
  check_same_shape(op, "dx", dx, "x", x);
  VELA_CHECK(x.size(-1) % 2 == 0, op, ": x ", x.str(), " must have an even last dim (gate | up)");
  RowLayout rx = check_rows(op, "x", x), rd = check_rows(op, "dout", dout);
  VELA_CHECK(rd.n_rows == rx.n_rows && rd.n_cols * 2 == rx.n_cols, op, ": dout ", dout.str(),
             " must be [n_rows, inter] for x ", x.str());
  check_out_rows(op, "dx", dx);
  check_same_device(op, "dout", dout, "x", x);
  check_same_device(op, "dx", dx, "x", x);
  VELA_DISPATCH(x.device(), silu_and_mul_backward, x, dout, dx);
}

}  // namespace vela::ops
