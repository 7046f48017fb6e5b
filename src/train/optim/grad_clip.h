// Global-norm gradient clipping over a ParameterList: the L2 norm of all gradients together, as
// torch.nn.utils.clip_grad_norm_ computes it. The sum of squares is taken where the gradients live
// (ops::sum_squares: fixed 64Ki-element blocks in double, added in a fixed order, so the norm is
// the same bits for any thread count or launch), the scaling reads it there too
// (ops::scale_by_norm), and the norm comes back to the host once per call: on CUDA that read-back
// is the one wait of a clip. All gradients must be f32 and on one device.
#pragma once

#include "train/parameter.h"

namespace vela {

// The global L2 norm of every parameter's grad.
double grad_global_norm(const ParameterList& params);

// Scales all grads by max_norm / (norm + 1e-6) when the norm exceeds max_norm (> 0; <= 0 turns
// clipping off). Returns the pre-clip norm. A non-finite norm is returned as is and nothing is
// scaled: the caller decides (the trainer skips the step). Grads must be contiguous.
double clip_grad_norm(ParameterList& params, double max_norm);

}  // namespace vela
