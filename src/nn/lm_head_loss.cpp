// Chunked LM head + cross-entropy (forward and backward next to each other, one chunk at a time).
#include "nn/lm_head_loss.h"

#include <algorithm>
#include <vector>

#include "ops/cast.h"
#include "ops/cross_entropy.h"
#include "ops/gemm.h"

namespace vela {

LmHeadLossResult lm_head_loss(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                              const LmHeadLossOptions& opts, float grad_scale, Tensor& dhidden,
                              Tensor& dweight) {
  VELA_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
             "lm_head_loss: hidden ", hidden.str(), " does not fit the LM head ", weight.str());
  VELA_CHECK(
      targets.dim() == 1 && targets.size(0) == hidden.size(0) && targets.dtype() == DType::kI32,
      "lm_head_loss: targets ", targets.str(), " must be [", hidden.size(0), "] i32");
  VELA_CHECK(opts.chunk_rows > 0, "lm_head_loss: chunk_rows must be positive, got ",
             opts.chunk_rows);
  const bool backward = dhidden.defined();
  if (backward) {
    VELA_CHECK(dhidden.shape() == hidden.shape() && dhidden.dtype() == hidden.dtype(),
               "lm_head_loss: dhidden ", dhidden.str(), " must be like hidden ", hidden.str());
  }
  const int64_t n = hidden.size(0), vocab = weight.size(0);
  const int64_t chunk = std::min(opts.chunk_rows, std::max<int64_t>(n, 1));
  const Device dev = hidden.device();
  Tensor logits_buf = Tensor::empty({chunk, vocab}, DType::kF32, dev);  // [chunk, vocab]
  Tensor losses_buf = Tensor::empty({chunk}, DType::kF32, dev);
  std::vector<int32_t> host_targets = targets.to_vector<int32_t>();
  LmHeadLossResult result;
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t r1 = std::min(n, r0 + chunk), c = r1 - r0;
    int64_t n_valid = 0;
    for (int64_t i = r0; i < r1; ++i) n_valid += host_targets[i] != opts.ignore_index;
    if (n_valid == 0) {
      if (backward) dhidden.slice(0, r0, r1).zero_();
      continue;
    }
    Tensor h = hidden.slice(0, r0, r1);
    Tensor tgt = targets.slice(0, r0, r1);
    Tensor logits = logits_buf.slice(0, 0, c);
    Tensor losses = losses_buf.slice(0, 0, c);
    ops::gemm(h, weight, logits, /*trans_a=*/false, /*trans_b=*/true);
    ops::cross_entropy(logits, tgt, losses, opts.ignore_index, opts.label_smoothing);
    std::vector<float> host_losses = losses.to_vector<float>();
    for (int64_t i = 0; i < c; ++i) result.loss_sum += host_losses[i];
    result.n_tokens += n_valid;
    if (!backward) continue;
    ops::cross_entropy_backward(logits, tgt, logits, grad_scale, opts.ignore_index,
                                opts.label_smoothing);
    Tensor dlogits =
        logits.dtype() == weight.dtype() ? logits : ops::to_dtype(logits, weight.dtype());
    Tensor dh = dhidden.slice(0, r0, r1);
    ops::gemm(dlogits, weight, dh, /*trans_a=*/false, /*trans_b=*/false);
    if (dweight.defined())
      ops::gemm(dlogits, h, dweight, /*trans_a=*/true, /*trans_b=*/false, 1.0f, /*beta=*/1.0f);
  }
  return result;
}

}  // namespace vela
