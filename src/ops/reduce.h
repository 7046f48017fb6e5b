// Reductions over rows, used by backward passes (bias gradients).
//   sum_rows: out[j] (+)= sum_i x[i, j]; x: [n_rows, n_cols] (rows contiguous), out: [n_cols] f32.
// With accumulate the sums are added to out, otherwise out is overwritten.
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void sum_rows(const Tensor& x, Tensor& out, bool accumulate);

}  // namespace vela::ops
