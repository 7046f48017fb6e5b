// Cast between floating dtypes (f32, bf16, f16; round to nearest even) and plain copies of any
// dtype when both sides match. x and out: same shape, same device; contiguous, except that a
// same-dtype copy also takes row-strided tensors (a contiguous last dim, leading dims with one row
// stride: column slices of a matrix), stream-ordered on CUDA like every op (no host wait).
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void cast(const Tensor& x, Tensor& out);
// Convenience: a new tensor of `dtype` (x itself when it already has it).
Tensor to_dtype(const Tensor& x, DType dtype);

}  // namespace vela::ops
