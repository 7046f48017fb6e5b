// Elementwise arithmetic over contiguous tensors of one floating dtype (f32, bf16, f16), computed
// in fp32. `b` either has a's shape or is 1-D with a's last extent (broadcast over rows, e.g. a
// bias). `out` may alias `a`.
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void add(const Tensor& a, const Tensor& b, Tensor& out);   // out = a + b
void mul(const Tensor& a, const Tensor& b, Tensor& out);   // out = a * b
void scale(const Tensor& x, float s, Tensor& out);         // out = s * x

}  // namespace vela::ops
