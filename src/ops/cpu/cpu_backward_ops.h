// CPU entry points of the backward ops (ops/*.h *_backward, ops/reduce.h). Called only by the
// dispatchers after validation; f32 activations (the CPU training path is f32).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela::ops::cpu {

void rms_norm_backward(const Tensor& x, const Tensor& w, float eps, const Tensor& dout, Tensor& dx,
                       Tensor& dw, bool accumulate_dx);
void rotary_backward(Tensor& dx, const Tensor& positions, const Tensor& table);
void silu_and_mul_backward(const Tensor& x, const Tensor& dout, Tensor& dx);
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight);
void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& doc_ids, float scale, const Tensor& out,
                               const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                               const Tensor& lse);
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                            float grad_scale, int32_t ignore_index, float label_smoothing,
                            const Tensor& losses);
void sum_rows(const Tensor& x, Tensor& out, bool accumulate);

}  // namespace vela::ops::cpu
