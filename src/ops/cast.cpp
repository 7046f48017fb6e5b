// cast / to_dtype: dtype, shape, contiguity and device checks, then dispatch.
#include "ops/cast.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

void cast(const Tensor& x, Tensor& out) {
  const char* op = "cast";
  check_defined(op, "x", x);
  check_defined(op, "out", out);
  VELA_CHECK(x.dtype() == out.dtype() || (is_floating(x.dtype()) && is_floating(out.dtype())),
             "cast: cannot convert x ", x.str(), " to out ", out.str(),
             " (only between f32, bf16 and f16, or a copy of the same dtype)");
  check_same_shape(op, "out", out, "x", x);
  check_same_device(op, "out", out, "x", x);
  if (x.dtype() == out.dtype() && !(x.is_contiguous() && out.is_contiguous())) {
    check_rows(op, "x", x);  // a row-strided copy
    check_out_rows(op, "out", out);
  } else {
    check_contiguous(op, "x", x);
    check_contiguous(op, "out", out);
  }
  VELA_DISPATCH(x.device(), cast, x, out);
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  check_defined("to_dtype", "x", x);
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  cast(x.contiguous(), out);
  return out;
}

}  // namespace vela::ops
