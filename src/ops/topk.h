// Argmax and top-k over the last dim (ties resolve to the lower index, like torch on CPU).
//   x: [n_rows, n_cols] f32/bf16/f16
//   argmax:  out [n_rows] i32
//   topk:    values [n_rows, k] f32, indices [n_rows, k] i32, sorted by value descending;
//            1 <= k <= n_cols.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela::ops {

void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int64_t k, Tensor& values, Tensor& indices);

}  // namespace vela::ops
