// RMSNorm over the last dim: out = x / sqrt(mean(x^2) + eps) * w, statistics in fp32.
//   x, out: [n_rows, hidden] (any leading dims; rows contiguous)   w: [hidden]
// dtypes: x/out f32, bf16 or f16 (same); w f32 or x's dtype.
// add_rms_norm fuses the residual add of a pre-norm block (vLLM's fused_add_rms_norm):
//   residual += x;  out = rms_norm(residual) * w     (residual is updated in place)
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out);
void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out);

}  // namespace vela::ops
