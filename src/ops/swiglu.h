// SwiGLU activation: out = silu(gate) * up, silu(g) = g / (1 + exp(-g)), computed in fp32.
//   gate, up, out: [n_rows, inter] (rows contiguous; row strides free, so gate and up may be the
//   two halves of one fused [n_rows, 2*inter] projection). dtypes f32/bf16/f16, all the same.
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
// Fused-projection form (vLLM silu_and_mul): x [n_rows, 2*inter] = [gate | up] -> out [n_rows, inter].
void silu_and_mul(const Tensor& x, Tensor& out);

// Backward of silu_and_mul. x: [n_rows, 2*inter] the forward input (gate | up),
// dout: [n_rows, inter], dx: [n_rows, 2*inter] (overwritten).
void silu_and_mul_backward(const Tensor& x, const Tensor& dout, Tensor& dx);

}  // namespace vela::ops
