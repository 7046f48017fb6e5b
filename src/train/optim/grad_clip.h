// Global-norm gradient clipping over a ParameterList: the L2 norm of all gradients together, as
// torch.nn.utils.clip_grad_norm_ computes it. Partial sums are taken over fixed 64Ki-element
// blocks in double and added in order, so the norm is the same bits for any thread count.
#pragma once

#include "train/parameter.h"

namespace vela {

// The global L2 norm of every parameter's grad (a CUDA grad is read through the host).
double grad_global_norm(const ParameterList& params);

// Scales all grads by max_norm / (norm + 1e-6) when the norm exceeds max_norm (> 0; <= 0 turns
// clipping off). Returns the pre-clip norm. A non-finite norm is returned as is and nothing is
// scaled: the caller decides (the trainer skips the step).
double clip_grad_norm(ParameterList& params, double max_norm);

}  // namespace vela
