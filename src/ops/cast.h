// Cast between floating dtypes (f32, bf16, f16; round to nearest even) and plain copies of any
// dtype when both sides match. x and out: same shape, contiguous, same device.
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void cast(const Tensor& x, Tensor& out);
// Convenience: a new tensor of `dtype` (x itself when it already has it).
Tensor to_dtype(const Tensor& x, DType dtype);

}  // namespace vela::ops
