// add / mul / scale: dtype, shape (same or last-dim broadcast of b), contiguity and device checks,
// then dispatch to the backend.
#include "ops/elementwise.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

namespace {

void check_binary(const char* op, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_defined(op, "a", a);
  check_defined(op, "b", b);
  check_defined(op, "out", out);
  check_floating(op, "a", a);
  check_same_dtype(op, "b", b, "a", a);
  check_same_dtype(op, "out", out, "a", a);
  check_same_device(op, "b", b, "a", a);
  check_same_device(op, "out", out, "a", a);
  bool broadcast = a.dim() >= 1 && b.dim() == 1 && b.size(0) == a.size(-1);
  VELA_CHECK(b.shape() == a.shape() || broadcast, op, ": b ", b.str(), " must have the shape of a ",
             a.str(), " or be 1-D with its last extent");
  check_same_shape(op, "out", out, "a", a);
  check_contiguous(op, "a", a);
  check_contiguous(op, "b", b);
  check_contiguous(op, "out", out);
}

}  // namespace

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  check_binary("add", a, b, out);
  VELA_DISPATCH(a.device(), add, a, b, out);
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
  check_binary("mul", a, b, out);
  VELA_DISPATCH(a.device(), mul, a, b, out);
}

void scale(const Tensor& x, float s, Tensor& out) {
  const char* op = "scale";
  check_defined(op, "x", x);
  check_defined(op, "out", out);
  check_floating(op, "x", x);
  check_same_dtype(op, "out", out, "x", x);
  check_same_device(op, "out", out, "x", x);
  check_same_shape(op, "out", out, "x", x);
  check_contiguous(op, "x", x);
  check_contiguous(op, "out", out);
  VELA_DISPATCH(x.device(), scale, x, s, out);
}

}  // namespace vela::ops
