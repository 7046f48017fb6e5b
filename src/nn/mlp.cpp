// SwiGLU MLP forward.
#include "nn/mlp.h"

#include "core/scratch_arena.h"
#include "ops/swiglu.h"

namespace vela {

void Mlp::forward(const Tensor& x, Tensor& out) const {
  const int64_t n = x.size(0), i = inter();
  Tensor h = scratch_tensor({n, 2 * i}, x.dtype(), x.device());
  gate_up.forward(x, h);
  Tensor act = scratch_tensor({n, i}, x.dtype(), x.device());
  ops::silu_and_mul(h, act);
  down.forward(act, out);
}

}  // namespace vela
