// sum_rows: checks, then dispatch.
#include "ops/reduce.h"

#include "ops/backward_dispatch.h"
#include "ops/checks.h"

namespace vela::ops {

void sum_rows(const Tensor& x, Tensor& out, bool accumulate) {
  const char* op = "sum_rows";
  check_defined(op, "x", x);
  check_defined(op, "out", out);
  check_floating(op, "x", x);
  if (x.is_cpu()) check_dtype(op, "x", x, DType::kF32);
  RowLayout r = check_rows(op, "x", x);
  check_dtype(op, "out", out, DType::kF32);
  check_shape(op, "out", out, Shape{r.n_cols});
  check_contiguous(op, "out", out);
  check_same_device(op, "out", out, "x", x);
  VELA_DISPATCH(x.device(), sum_rows, x, out, accumulate);
}

}  // namespace vela::ops
