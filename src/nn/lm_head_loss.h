// Fused, chunked LM head + cross-entropy: the loss of a [n_rows, hidden] block of final hidden
// states against next-token targets, and its gradients, computed ce_chunk rows at a time so a
// [n_rows, vocab] logits matrix never exists (a 151k vocabulary at 16k tokens would be 10 GB in
// f32). Per chunk: logits = h W^T (f32); then one kernel writes the per-row CE (ignore index,
// label smoothing) and dlogits = grad_scale * dCE in the weight's dtype (in place when f32);
// dh = dlogits W, dW += dlogits^T h. The losses are read back once, after the last chunk.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela {

struct LmHeadLossOptions {
  int64_t chunk_rows = 4096;
  float label_smoothing = 0.0f;
  int32_t ignore_index = -100;
};

struct LmHeadLossResult {
  double loss_sum = 0.0;  // sum of per-row losses over non-ignored rows
  int64_t n_tokens = 0;   // non-ignored rows
};

// hidden: [n_rows, hidden] (after the final norm)   weight: [vocab, hidden]
// targets: [n_rows] i32 (kIgnoreIndex rows take no loss), on the device of hidden.
// With backward: dhidden [n_rows, hidden] (dtype of hidden) = grad_scale * d(loss_sum)/d(hidden)
// (overwritten) and dweight [vocab, hidden] f32 += grad_scale * d(loss_sum)/d(weight); pass
// undefined tensors for a forward-only evaluation.
LmHeadLossResult lm_head_loss(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                              const LmHeadLossOptions& opts, float grad_scale, Tensor& dhidden,
                              Tensor& dweight);

}  // namespace vela
