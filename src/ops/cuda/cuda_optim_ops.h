// CUDA entry points of the optimizer ops (ops/optim.h), in ops/cuda/optim.cu. Called only by the
// dispatcher after validation; launched on the current stream, nothing waits.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "ops/optim.h"

namespace vela::ops::cuda {

void adamw_update(Tensor& master, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                  Tensor& weight, const AdamWHyper& h);
void muon_momentum(Tensor& buf, const Tensor& grad, Tensor& u, float mu, bool nesterov);
void decayed_step(Tensor& w, const Tensor& update, float decay, float step);
void sum_squares(const std::vector<Tensor>& xs, Tensor& out);
void scale_by_norm(std::vector<Tensor>& xs, const Tensor& sum_sq, double numer, double eps,
                   double threshold);

}  // namespace vela::ops::cuda
