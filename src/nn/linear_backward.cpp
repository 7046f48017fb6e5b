// Linear backward: dx = dy @ W (overwritten), dW += dy^T @ x, db += sum_rows(dy); all through
// ops::gemm (fp32 accumulation; f32 parameter gradients).
#include "nn/linear.h"
#include "nn/lora.h"
#include "ops/gemm.h"
#include "ops/reduce.h"

namespace vela {

void Linear::backward(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dweight,
                      Tensor& dbias) const {
  VELA_CHECK(dy.dim() == 2 && dy.size(1) == out_features() && x.dim() == 2 &&
                 x.size(0) == dy.size(0) && x.size(1) == in_features(),
             "Linear::backward: x ", x.str(), " and dy ", dy.str(), " do not fit weight ",
             weight.str());
  if (dx.defined()) ops::gemm(dy, weight, dx, /*trans_a=*/false, /*trans_b=*/false);
  if (dweight.defined())
    ops::gemm(dy, x, dweight, /*trans_a=*/true, /*trans_b=*/false, 1.0f, /*beta=*/1.0f);
  if (bias.defined() && dbias.defined()) ops::sum_rows(dy, dbias, /*accumulate=*/true);
  if (lora) lora->backward(x, dy, dx);
}

}  // namespace vela
