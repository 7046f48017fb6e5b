// Linear: y = x @ weight^T + bias, the HF nn.Linear convention, with its backward.
// Gradients: parameter grads (f32) accumulate (+=), the input grad is overwritten.
#pragma once

#include <memory>

#include "core/tensor.h"

namespace vela {

struct LoraLinear;  // nn/lora.h

struct Linear {
  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features], or undefined
  // LoRA adapters on this projection (nn/lora.h), or null. forward adds their output and backward
  // their gradients; a copy of the Linear shares them.
  std::shared_ptr<LoraLinear> lora;

  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }
  // x: [n_rows, in] -> y: [n_rows, out] (preallocated; dtype of x or f32).
  void forward(const Tensor& x, Tensor& y) const;
  // x: [n_rows, in] the forward input   dy: [n_rows, out]
  //   dx: [n_rows, in] = dy @ weight (overwritten; undefined = not needed)
  //   dweight: [out, in] f32 += dy^T @ x   dbias: [out] f32 += sum_rows(dy) (undefined = skip: a
  //   frozen base under LoRA)
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dweight,
                Tensor& dbias) const;
};

}  // namespace vela
