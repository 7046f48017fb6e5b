// SwiGLU MLP: down(silu(gate(x)) * up(x)); gate and up are one fused weight [2 * inter, hidden].
// forward_train saves the fused projection and the activation for backward.
#pragma once

#include "core/tensor.h"
#include "nn/linear.h"

namespace vela {

// Parameter gradients (f32, accumulated).
struct MlpGrads {
  Tensor dgate_up;  // [2 * inter, hidden]
  Tensor ddown;     // [hidden, inter]
};

// What backward needs from the forward.
struct MlpSaved {
  Tensor gate_up;  // [n_rows, 2 * inter] gate | up projections
  Tensor act;      // [n_rows, inter] silu(gate) * up
};

struct Mlp {
  Linear gate_up;  // weight [2 * inter, hidden]: rows [0, inter) gate, [inter, 2 * inter) up
  Linear down;     // weight [hidden, inter]

  int64_t inter() const { return down.in_features(); }
  // x: [n_rows, hidden] -> out: [n_rows, hidden]
  void forward(const Tensor& x, Tensor& out) const;
  void forward_train(const Tensor& x, Tensor& out, MlpSaved& saved) const;
  // x: [n_rows, hidden] the forward input   dout: [n_rows, hidden]   dx: [n_rows, hidden]
  // (overwritten).
  void backward(const Tensor& x, const MlpSaved& saved, const Tensor& dout, Tensor& dx,
                MlpGrads& grads) const;
};

}  // namespace vela
