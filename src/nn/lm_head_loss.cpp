// Chunked LM head + cross-entropy (forward and backward next to each other, one chunk at a time).
#include "nn/lm_head_loss.h"

#include <algorithm>
#include <vector>

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
  // The gradient goes straight into the weight's dtype for the two backward GEMMs (f32: in place
  // over the logits).
  Tensor dlogits_buf = backward && weight.dtype() != DType::kF32
                           ? Tensor::empty({chunk, vocab}, weight.dtype(), dev)
                           : logits_buf;
  Tensor losses_all = Tensor::zeros({n}, DType::kF32, dev);  // read back once, at the end
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
    result.n_tokens += n_valid;
    Tensor h = hidden.slice(0, r0, r1);
    Tensor tgt = targets.slice(0, r0, r1);
    Tensor logits = logits_buf.slice(0, 0, c);
    Tensor losses = losses_all.slice(0, r0, r1);
    ops::gemm(h, weight, logits, /*trans_a=*/false, /*trans_b=*/true);
    if (!backward) {
      ops::cross_entropy(logits, tgt, losses, opts.ignore_index, opts.label_smoothing);
      continue;
    }
    Tensor dlogits = dlogits_buf.slice(0, 0, c);
    ops::cross_entropy_backward(logits, tgt, dlogits, grad_scale, opts.ignore_index,
                                opts.label_smoothing, losses);
    Tensor dh = dhidden.slice(0, r0, r1);
    ops::gemm(dlogits, weight, dh, /*trans_a=*/false, /*trans_b=*/false);
    if (dweight.defined())
      ops::gemm(dlogits, h, dweight, /*trans_a=*/true, /*trans_b=*/false, 1.0f, /*beta=*/1.0f);
  }
  for (float l : losses_all.to_vector<float>()) result.loss_sum += l;  // row order, as before
  return result;
}

}  // namespace vela
