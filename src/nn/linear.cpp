// Linear forward (backward lands with training).
#include "nn/linear.h"

#include "nn/lora.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"

namespace vela {

void Linear::forward(const Tensor& x, Tensor& y) const {
  ops::gemm(x, weight, y, /*trans_a=*/false, /*trans_b=*/true);
  if (bias.defined()) ops::add(y, bias, y);
  if (lora) lora->forward_add(x, y, 0, out_features());
}

}  // namespace vela
