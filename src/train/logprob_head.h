// Chunked LM head -> per-token log-probabilities, and the backward of any loss written over them.
// The preference and RL objectives (DPO, GRPO) are functions of log p(target) per token; their
// gradient w.r.t. the model is sum_r c_r * d log p_r / d theta with c_r = dL / d log p_r, so the
// head computes the log-probs (forward only), the strategy turns them into the coefficients c_r,
// and the backward pass recomputes each chunk's logits and writes
//   dlogits_r = c_r * (onehot(target_r) - softmax(logits_r)),  dh = dlogits W,  dW += dlogits^T h.
// With a temperature T the log-probs are those of softmax(logits / T) (GRPO: the distribution
// the rollouts were sampled from) and dlogits_r = (c_r / T) (onehot - softmax(logits_r / T)).
// Like nn/lm_head_loss.h no [n_rows, vocab] matrix exists beyond one chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace vela {

// hidden: [n_rows, hidden] (after the final norm)   weight: [vocab, hidden]
// targets: [n_rows] i32 on hidden's device; host_targets the same values on the host.
// Returns logp [n_rows]: log softmax(hidden_r weight^T / temperature)[target_r] (f32 logits, the
// product scaled by 1 / temperature in the GEMM), 0 on rows whose target is `ignore_index`.
std::vector<float> lm_head_logprobs(const Tensor& hidden, const Tensor& weight,
                                    const Tensor& targets, const std::vector<int32_t>& host_targets,
                                    int64_t chunk_rows, int32_t ignore_index,
                                    float temperature = 1.0f);

// The backward of L(logp) with coef[r] = dL/dlogp_r (ignored rows: must be 0 or are skipped):
// dhidden [n_rows, hidden] (hidden's dtype) overwritten, dweight [vocab, hidden] f32 accumulated.
void lm_head_logprobs_backward(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                               const std::vector<int32_t>& host_targets,
                               const std::vector<float>& coef, int64_t chunk_rows,
                               int32_t ignore_index, Tensor& dhidden, Tensor& dweight,
                               float temperature = 1.0f);

}  // namespace vela
