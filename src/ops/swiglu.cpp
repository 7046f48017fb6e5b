// silu_mul / silu_and_mul: shape, dtype, row-layout and device checks, then dispatch.
#include "ops/swiglu.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  const char* op = "silu_mul";
  check_defined(op, "gate", gate);
  check_defined(op, "up", up);
  check_defined(op, "out", out);
  check_min_rank(op, "gate", gate, 1);
  check_floating(op, "gate", gate);
  check_same_dtype(op, "up", up, "gate", gate);
  check_same_dtype(op, "out", out, "gate", gate);
  check_same_shape(op, "up", up, "gate", gate);
  check_same_shape(op, "out", out, "gate", gate);
  check_same_device(op, "up", up, "gate", gate);
  check_same_device(op, "out", out, "gate", gate);
  check_rows(op, "gate", gate);
  check_rows(op, "up", up);
  check_out_rows(op, "out", out);
  VELA_DISPATCH(gate.device(), silu_mul, gate, up, out);
}

void silu_and_mul(const Tensor& x, Tensor& out) {
  const char* op = "silu_and_mul";
  check_defined(op, "x", x);
  check_defined(op, "out", out);
  check_min_rank(op, "x", x, 1);
  VELA_CHECK(x.size(-1) % 2 == 0, op, ": x ", x.str(),
             " must have an even last extent [gate | up]");
  int64_t inter = x.size(-1) / 2;
  Shape expect = x.shape();
  expect[expect.size() - 1] = inter;
  check_shape(op, "out", out, expect);
  silu_mul(x.slice(-1, 0, inter), x.slice(-1, inter, 2 * inter), out);
}

}  // namespace vela::ops
