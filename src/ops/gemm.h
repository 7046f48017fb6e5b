// GEMM: c = alpha * op(a) @ op(b) + beta * c, op(x) = x or x^T.
//
//   a: [M, K] ([K, M] when trans_a)     b: [K, N] ([N, K] when trans_b)     c: [M, N]
//   batched: a, b, c may carry one leading batch dim [B, ...]; a 2-D b is shared by all batches.
// dtypes: a and b both f32, both bf16 or both f16; c is f32 or the input dtype. Accumulation is
// always fp32. The innermost dim of each operand must be contiguous (leading strides are free, so
// row slices of a bigger matrix work). CPU: OpenBLAS (bf16/f16 inputs converted in panels);
// CUDA: cuBLASLt with the algorithm choice cached per shape.
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void gemm(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a = false, bool trans_b = false,
          float alpha = 1.0f, float beta = 0.0f);

// Convenience: returns a new c = op(a) @ op(b) of dtype `out_dtype` (default: a's dtype).
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

}  // namespace vela::ops
