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

// Backward (training; CPU f32, CUDA f32/bf16/f16). x: the forward input, dout: d(out).
//   rms_norm_backward:     dx = d/dx (overwritten; may alias dout)
//   add_rms_norm_backward: residual is the forward's updated residual (the norm's input);
//                          dresidual += d/d(residual) — the fused add passes it on unchanged
//   dw: [hidden] f32, += sum over rows of dout * x_hat (undefined = skip)
void rms_norm_backward(const Tensor& x, const Tensor& w, float eps, const Tensor& dout, Tensor& dx,
                       Tensor& dw);
void add_rms_norm_backward(const Tensor& residual, const Tensor& w, float eps, const Tensor& dout,
                           Tensor& dresidual, Tensor& dw);

}  // namespace vela::ops
