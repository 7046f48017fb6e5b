// Linear: y = x @ weight^T + bias, the HF nn.Linear convention.
#pragma once

#include "core/tensor.h"

namespace vela {

struct Linear {
  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features], or undefined

  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }
  // x: [n_rows, in] -> y: [n_rows, out] (preallocated; dtype of x or f32).
  void forward(const Tensor& x, Tensor& y) const;
};

}  // namespace vela
