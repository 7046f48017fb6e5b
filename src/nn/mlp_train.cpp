// SwiGLU MLP training path: forward keeping the fused projection and the activation, backward
//   dact = dout @ W_down;  d(gate|up) = silu_and_mul_backward;  dx = d(gate|up) @ W_gate_up.
#include "nn/mlp.h"
#include "ops/swiglu.h"

namespace vela {

void Mlp::forward_train(const Tensor& x, Tensor& out, MlpSaved& saved) const {
  const int64_t n = x.size(0), i = inter();
  saved.gate_up = Tensor::empty({n, 2 * i}, x.dtype(), x.device());
  gate_up.forward(x, saved.gate_up);
  saved.act = Tensor::empty({n, i}, x.dtype(), x.device());
  ops::silu_and_mul(saved.gate_up, saved.act);
  down.forward(saved.act, out);
}

void Mlp::backward(const Tensor& x, const MlpSaved& saved, const Tensor& dout, Tensor& dx,
                   MlpGrads& grads) const {
  const int64_t n = x.size(0), i = inter();
  Tensor none;
  Tensor dact = Tensor::empty({n, i}, dout.dtype(), dout.device());  // [n, inter]
  down.backward(saved.act, dout, dact, grads.ddown, none);
  Tensor dgate_up = Tensor::empty({n, 2 * i}, dout.dtype(), dout.device());  // [n, 2 * inter]
  ops::silu_and_mul_backward(saved.gate_up, dact, dgate_up);
  gate_up.backward(x, dgate_up, dx, grads.dgate_up, none);
}

}  // namespace vela
