// SwiGLU MLP: down(silu(gate(x)) * up(x)); gate and up are one fused weight [2 * inter, hidden].
#pragma once

#include "core/tensor.h"
#include "nn/linear.h"

namespace vela {

struct Mlp {
  Linear gate_up;  // weight [2 * inter, hidden]: rows [0, inter) gate, [inter, 2 * inter) up
  Linear down;     // weight [hidden, inter]

  int64_t inter() const { return down.in_features(); }
  // x: [n_rows, hidden] -> out: [n_rows, hidden]
  void forward(const Tensor& x, Tensor& out) const;
};

}  // namespace vela
