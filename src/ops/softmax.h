// Softmax / log-softmax over the last dim, computed in fp32 with max subtraction.
//   x: [n_rows, n_cols] f32/bf16/f16 (any leading dims)   out: same shape, f32 or x's dtype.
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void softmax(const Tensor& x, Tensor& out);
void log_softmax(const Tensor& x, Tensor& out);

}  // namespace vela::ops
