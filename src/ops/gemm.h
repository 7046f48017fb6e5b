// GEMM: c = alpha * op(a) @ op(b) + beta * c, op(x) = x or x^T.
//
//   a: [M, K] ([K, M] when trans_a)     b: [K, N] ([N, K] when trans_b)     c: [M, N]
//   batched: a, b, c may carry one leading batch dim [B, ...]; a 2-D b is shared by all batches.
// dtypes: a and b both f32, both bf16 or both f16; c is f32 or the input dtype. Accumulation is
// always fp32. The innermost dim of each operand must be contiguous (leading strides are free, so
// row slices of a bigger matrix work). CPU: OpenBLAS (bf16/f16 inputs converted in panels);
// CUDA: cuBLASLt with the algorithm choice cached per shape, except a @ b^T of a few bf16/f16 rows
// (1..2: the GEMV, 3..64 on sm_90: the wgmma GEMM, 3..8 elsewhere: the skinny GEMM). Those
// kernels start reading b before the kernels launched before them have finished (programmatic
// dependent launch, pdl.cuh), so b must not be written by a kernel still in flight: weights, as in
// every current caller.
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void gemm(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a = false, bool trans_b = false,
          float alpha = 1.0f, float beta = 0.0f);

// Whether the CPU backend multiplies bf16 natively on this machine: built with AVX-512 BF16
// (VELA_NATIVE on such a CPU) and running on a CPU that has it. bf16 weights then stream at half
// of f32's bytes through the vdpbf16ps / AMX kernels, and `--dtype auto` keeps a bf16 checkpoint
// in bf16 on the CPU (cli/model_dtype.h); elsewhere bf16 GEMMs convert panels to f32 for OpenBLAS.
bool cpu_bf16_native();

// Convenience: returns a new c = op(a) @ op(b) of dtype `out_dtype` (default: a's dtype).
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

}  // namespace vela::ops
