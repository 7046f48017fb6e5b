// Optimizer ops: the fused per-element updates of AdamW and Muon, and the deterministic global
// sum of squares that gradient clipping and Newton-Schulz normalize by. They run where the tensors
// live (CPU or CUDA), so optimizer state never travels through the host during a step.
//
// Every tensor is contiguous; all tensors of one call share a device. State (master weights,
// moments, momentum, gradients) is f32; the compute weights of adamw_update may be f32, bf16 or
// f16. The CPU twins are the reference and reproduce the arithmetic train/optim had before these
// ops existed bit for bit; CUDA computes the same fp32 expressions (the compiler may contract a
// different set of multiply-adds into FMAs, so CUDA agrees to a few fp32 ulps, not bitwise).
//
// f64 scalars: vela has no f64 dtype, so a double lives in an 8-byte [1] i64 tensor (its bits);
// make_f64_scalar() makes one and read_f64_scalar() reads it (on CUDA: a copy that waits).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace vela::ops {

// One AdamW update's scalars (see adamw_update): bias corrections folded in on the host.
struct AdamWHyper {
  float step_size = 0;     // lr / (1 - beta1^t)
  float b1 = 0.9f;         // beta1
  float b2 = 0.95f;        // beta2
  float inv_sqrt_bc2 = 1;  // 1 / sqrt(1 - beta2^t)
  float eps = 1e-8f;
  float decay = 1;  // 1 - lr * weight_decay for decayed params, else 1
};

// Per element, in fp32 with g = grad:
//   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g g
//   master <- master * decay - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps)
// then weight <- master rounded to weight's dtype (to nearest even, as ops::to_dtype). `weight`
// may be undefined or alias `master` (nothing more is written then). master, grad, exp_avg,
// exp_avg_sq: f32, one shape; weight: f32/bf16/f16 of that shape.
void adamw_update(Tensor& master, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                  Tensor& weight, const AdamWHyper& h);

// Muon's momentum (torch lerp form) and the tensor Newton-Schulz orthogonalizes, per element:
//   buf <- mu buf + (1 - mu) g;  u <- nesterov ? (1 - mu) g + mu buf : buf
// buf, grad, u: f32, one shape.
void muon_momentum(Tensor& buf, const Tensor& grad, Tensor& u, float mu, bool nesterov);

// w <- w * decay - step * update (Muon's decoupled decay and orthogonalized step). f32, one shape.
void decayed_step(Tensor& w, const Tensor& update, float decay, float step);

// out (an f64 scalar) <- sum over xs of sum_i x[i]^2, deterministically: each tensor is split into
// fixed 64Ki-element blocks whose partial sums are taken in double and added in a fixed order, so
// the result does not depend on the thread count or the launch configuration. CPU: blocks added in
// order per tensor, tensor totals in list order (the reference). CUDA: one launch per 48 tensors
// writes the block partials, one more adds them; no atomics. xs: f32, any count (may be empty).
void sum_squares(const std::vector<Tensor>& xs, Tensor& out);

// Scales every x in xs in place by s = f32(numer / (sqrt(sum_sq) + eps)) when the norm
// sqrt(sum_sq) is finite and above `threshold`, else leaves them. sum_sq is an f64 scalar on xs'
// device, read there (no host round trip). Gradient clipping: numer = threshold = max_norm,
// eps = 1e-6; Newton-Schulz's normalization: numer = 1, eps = 1e-7, threshold = -1.
void scale_by_norm(std::vector<Tensor>& xs, const Tensor& sum_sq, double numer, double eps,
                   double threshold);

Tensor make_f64_scalar(Device device);    // [1] i64 holding the double 0.0
double read_f64_scalar(const Tensor& t);  // waits for the device

}  // namespace vela::ops
