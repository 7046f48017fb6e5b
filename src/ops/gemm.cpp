// gemm / matmul: shape, dtype, device and stride validation, then dispatch to the backend.
#include "ops/gemm.h"

#include <algorithm>

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

namespace {

// Innermost dim contiguous; leading (row) stride at least the row length so rows do not overlap.
void check_matrix_strides(const char* name, const Tensor& t) {
  int64_t rows = t.size(-2), cols = t.size(-1);
  VELA_CHECK(cols <= 1 || t.stride(-1) == 1, "gemm: ", name, " ", t.str(),
             " must have a contiguous innermost dim (stride ", t.stride(-1), ")");
  VELA_CHECK(rows <= 1 || t.stride(-2) >= cols, "gemm: ", name, " ", t.str(), " has row stride ",
             t.stride(-2), " smaller than its row length ", cols);
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha,
          float beta) {
  const char* op = "gemm";
  check_defined(op, "a", a);
  check_defined(op, "b", b);
  check_defined(op, "c", c);
  VELA_CHECK(a.dim() == 2 || a.dim() == 3, "gemm: a ", a.str(), " must have rank 2 or 3");
  VELA_CHECK(b.dim() == 2 || b.dim() == a.dim(), "gemm: b ", b.str(),
             " must have rank 2 or the rank of a ", a.str());
  VELA_CHECK(c.dim() == a.dim(), "gemm: c ", c.str(), " must have the rank of a ", a.str());
  check_floating(op, "a", a);
  check_same_dtype(op, "b", b, "a", a);
  VELA_CHECK(c.dtype() == DType::kF32 || c.dtype() == a.dtype(), "gemm: c ", c.str(),
             " must be f32 or the input dtype ", dtype_name(a.dtype()));
  check_same_device(op, "b", b, "a", a);
  check_same_device(op, "c", c, "a", a);

  int64_t m = trans_a ? a.size(-1) : a.size(-2);
  int64_t k = trans_a ? a.size(-2) : a.size(-1);
  int64_t kb = trans_b ? b.size(-1) : b.size(-2);
  int64_t n = trans_b ? b.size(-2) : b.size(-1);
  VELA_CHECK(k == kb, "gemm: inner dims differ: op(a) of ", a.str(), " has K=", k, ", op(b) of ",
             b.str(), " has K=", kb, " (trans_a=", trans_a, ", trans_b=", trans_b, ")");
  VELA_CHECK(c.size(-2) == m && c.size(-1) == n, "gemm: c ", c.str(), " must be [..., ", m, ", ", n,
             "] for a ", a.str(), " and b ", b.str());
  if (a.dim() == 3) {
    VELA_CHECK(c.size(0) == a.size(0), "gemm: batch of c ", c.str(), " differs from a ", a.str());
    VELA_CHECK(b.dim() == 2 || b.size(0) == a.size(0), "gemm: batch of b ", b.str(),
               " differs from a ", a.str());
    VELA_CHECK(c.size(0) <= 1 || m == 0 || n == 0 ||
                   c.stride(0) >= (m - 1) * std::max<int64_t>(c.stride(1), n) + n,
               "gemm: batches of c ", c.str(), " overlap");
  }
  check_matrix_strides("a", a);
  check_matrix_strides("b", b);
  check_matrix_strides("c", c);
  VELA_DISPATCH(c.device(), gemm, a, b, c, trans_a, trans_b, alpha, beta);
}

bool cpu_bf16_native() { return cpu::bf16_native(); }

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_defined("matmul", "a", a);
  check_defined("matmul", "b", b);
  VELA_CHECK(a.dim() == 2 || a.dim() == 3, "matmul: a ", a.str(), " must have rank 2 or 3");
  VELA_CHECK(b.dim() == 2 || b.dim() == 3, "matmul: b ", b.str(), " must have rank 2 or 3");
  int64_t m = trans_a ? a.size(-1) : a.size(-2);
  int64_t n = trans_b ? b.size(-2) : b.size(-1);
  Shape shape = a.dim() == 3 ? Shape{a.size(0), m, n} : Shape{m, n};
  Tensor c = Tensor::empty(shape, a.dtype(), a.device());
  gemm(a, b, c, trans_a, trans_b, 1.0f, 0.0f);
  return c;
}

}  // namespace vela::ops
