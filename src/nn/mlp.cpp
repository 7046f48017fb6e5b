// SwiGLU MLP forward.
#include "nn/mlp.h"

#include "core/scratch_arena.h"
#include "ops/fused_gemm.h"
#include "ops/swiglu.h"

namespace vela {

void Mlp::forward(const Tensor& x, Tensor& out) const {
  const int64_t n = x.size(0), i = inter();
  Tensor act = scratch_tensor({n, i}, x.dtype(), x.device());
  if (!gate_up.bias.defined() && !gate_up.lora) {
    ops::gemm_silu_mul(x, gate_up.weight, act);  // one kernel where the GPU has it
  } else {
    Tensor h = scratch_tensor({n, 2 * i}, x.dtype(), x.device());
    gate_up.forward(x, h);
    ops::silu_and_mul(h, act);
  }
  down.forward(act, out);
}

}  // namespace vela
