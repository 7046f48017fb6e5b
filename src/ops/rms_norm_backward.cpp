// rms_norm_backward / add_rms_norm_backward: checks, then dispatch.
#include "ops/backward_dispatch.h"
#include "ops/checks.h"
#include "ops/rms_norm.h"

namespace vela::ops {

namespace {

void check_norm_backward(const char* op, const Tensor& x, const Tensor& w, float eps,
                         const Tensor& dout, const Tensor& dx, const Tensor& dw) {
  check_defined(op, "x", x);
  check_defined(op, "w", w);
  check_defined(op, "dout", dout);
  check_defined(op, "dx", dx);
  check_min_rank(op, "x", x, 1);
  check_floating(op, "x", x);
  if (x.is_cpu()) check_dtype(op, "x", x, DType::kF32);
  check_same_dtype(op, "dout", dout, "x", x);
  check_same_dtype(op, "dx", dx, "x", x);
  check_same_shape(op, "dout", dout, "x", x);
  check_same_shape(op, "dx", dx, "x", x);
  check_rank(op, "w", w, 1);
  VELA_CHECK(w.dtype() == DType::kF32 || w.dtype() == x.dtype(), op, ": w ", w.str(),
             " must be f32 or the dtype of x ", x.str());
  VELA_CHECK(w.size(0) == x.size(-1), op, ": w ", w.str(), " must have the hidden size of x ",
             x.str());
  check_contiguous(op, "w", w);
  check_same_device(op, "w", w, "x", x);
  check_same_device(op, "dout", dout, "x", x);
  check_same_device(op, "dx", dx, "x", x);
  check_rows(op, "x", x);
  check_rows(op, "dout", dout);
  check_out_rows(op, "dx", dx);
  if (dw.defined()) {
    check_dtype(op, "dw", dw, DType::kF32);
    check_same_shape(op, "dw", dw, "w", w);
    check_contiguous(op, "dw", dw);
    check_same_device(op, "dw", dw, "x", x);
  }
  VELA_CHECK(eps >= 0.0f, op, ": eps ", eps, " must be >= 0");
}

}  // namespace

void rms_norm_backward(const Tensor& x, const Tensor& w, float eps, const Tensor& dout, Tensor& dx,
                       Tensor& dw) {
  check_norm_backward("rms_norm_backward", x, w, eps, dout, dx, dw);
  VELA_DISPATCH(x.device(), rms_norm_backward, x, w, eps, dout, dx, dw, /*accumulate_dx=*/false);
}

void add_rms_norm_backward(const Tensor& residual, const Tensor& w, float eps, const Tensor& dout,
                           Tensor& dresidual, Tensor& dw) {
  check_norm_backward("add_rms_norm_backward", residual, w, eps, dout, dresidual, dw);
  VELA_CHECK(dresidual.data_ptr() != dout.data_ptr(),
             "add_rms_norm_backward: dresidual must not alias dout");
  VELA_DISPATCH(residual.device(), rms_norm_backward, residual, w, eps, dout, dresidual, dw,
                /*accumulate_dx=*/true);
}

}  // namespace vela::ops
