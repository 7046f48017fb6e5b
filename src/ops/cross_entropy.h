// Cross-entropy from logits, per row, with ignore-index and label smoothing (torch semantics:
// loss = (1 - eps) * nll(target) + eps * mean_j(-log p_j)).
//   logits: [n_rows, vocab] f32/bf16/f16   targets: [n_rows] i32
//   losses: [n_rows] f32 (0 where target == ignore_index)
// Returns nothing; the caller reduces (mean over non-ignored rows = sum / count_valid).
// A target outside [0, vocab) that is not ignore_index is an InvalidArgument (checked on the CPU).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela::ops {

void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                   int32_t ignore_index = -100, float label_smoothing = 0.0f);

// Gradient of grad_scale * sum_rows(loss) w.r.t. the logits:
//   dlogits = grad_scale * (softmax(logits) - (1 - eps) * onehot(target) - eps / vocab),
// 0 on ignored rows. dlogits: [n_rows, vocab] f32 (may alias f32 logits), or on CUDA bf16/f16 (the
// dtype the LM head's backward GEMMs take, so no separate cast pass). When `losses` ([n_rows]
// f32) is defined the per-row losses of cross_entropy are written too, from the same pass over
// the logits (the fused LM-head loss runs one kernel per chunk instead of two).
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                            float grad_scale, int32_t ignore_index = -100,
                            float label_smoothing = 0.0f, const Tensor& losses = Tensor());

}  // namespace vela::ops
