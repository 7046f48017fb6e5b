// rms_norm / add_rms_norm / the norm pieces: shape, dtype, row-layout and device checks, then
// dispatch.
#include "ops/rms_norm.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

namespace {

void check_norm(const char* op, const Tensor& x, const Tensor& w, float eps, const Tensor& out) {
  check_defined(op, "x", x);
  check_defined(op, "w", w);
  check_defined(op, "out", out);
  check_min_rank(op, "x", x, 1);
  check_floating(op, "x", x);
  check_same_dtype(op, "out", out, "x", x);
  VELA_CHECK(w.dtype() == DType::kF32 || w.dtype() == x.dtype(), op, ": w ", w.str(),
             " must be f32 or the dtype of x ", x.str());
  check_rank(op, "w", w, 1);
  VELA_CHECK(w.size(0) == x.size(-1), op, ": w ", w.str(), " must have the hidden size of x ",
             x.str());
  check_same_shape(op, "out", out, "x", x);
  check_same_device(op, "w", w, "x", x);
  check_same_device(op, "out", out, "x", x);
  check_rows(op, "x", x);
  check_out_rows(op, "out", out);
  check_contiguous(op, "w", w);
  VELA_CHECK(eps >= 0.0f, op, ": eps ", eps, " must be >= 0");
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  check_norm("rms_norm", x, w, eps, out);
  VELA_DISPATCH(x.device(), rms_norm, x, w, eps, out);
}

void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) {
  const char* op = "add_rms_norm";
  check_norm(op, x, w, eps, out);
  check_defined(op, "residual", residual);
  check_same_dtype(op, "residual", residual, "x", x);
  check_same_shape(op, "residual", residual, "x", x);
  check_same_device(op, "residual", residual, "x", x);
  check_out_rows(op, "residual", residual);
  VELA_DISPATCH(x.device(), add_rms_norm, x, residual, w, eps, out);
}

void norm_pieces(const Tensor& x, const Tensor& w, NormPieces& out) {
  const char* op = "norm_pieces";
  check_defined(op, "x", x);
  check_rank(op, "x", x, 2);
  check_norm(op, x, w, 0.0f, x);
  check_norm_pieces(op, out, x);
  VELA_DISPATCH(x.device(), norm_pieces, x, w, out.scaled, out.row_sq);
}

void rms_scale_rows(const NormPieces& in, float eps, Tensor& out) {
  const char* op = "rms_scale_rows";
  check_defined(op, "scaled", in.scaled);
  check_rank(op, "scaled", in.scaled, 2);
  check_floating(op, "scaled", in.scaled);
  check_rows(op, "scaled", in.scaled);
  check_norm_pieces(op, in, in.scaled);
  check_defined(op, "out", out);
  check_same_dtype(op, "out", out, "scaled", in.scaled);
  check_same_shape(op, "out", out, "scaled", in.scaled);
  check_same_device(op, "out", out, "scaled", in.scaled);
  check_out_rows(op, "out", out);
  VELA_CHECK(eps >= 0.0f, op, ": eps ", eps, " must be >= 0");
  VELA_DISPATCH(in.scaled.device(), rms_scale_rows, in.scaled, in.row_sq, eps, out);
}

}  // namespace vela::ops
