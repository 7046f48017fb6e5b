// CUDA entry points of the backward ops (ops/*.h *_backward, ops/reduce.h) and of the dense
// training-path attention forward (ops::causal_attention). Called only by the dispatchers after
// validation; activations f32, bf16 or f16, parameter gradients f32.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela::ops::cuda {

void rms_norm_backward(const Tensor& x, const Tensor& w, float eps, const Tensor& dout, Tensor& dx,
                       Tensor& dw, bool accumulate_dx);
void rotary_backward(Tensor& dx, const Tensor& positions, const Tensor& table);
void silu_and_mul_backward(const Tensor& x, const Tensor& dout, Tensor& dx);
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight);
void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                      float scale, Tensor& out, const Tensor& lse);
void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& doc_ids, float scale, const Tensor& out,
                               const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                               const Tensor& lse);

// The fused flash-style kernels behind the two above (ops/cuda/attention_flash.cu): bf16/f16,
// head_dim a multiple of 8 in [32, 256], rows 16-byte aligned (flash_attention_supported). lse: f32
// [batch, n_heads, seq]; the forward writes it when defined, the backward reads it when defined
// and otherwise runs the forward's statistics pass itself. Deterministic (no atomics).
bool flash_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v);
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& doc_ids, float scale, Tensor& out, const Tensor& lse);
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& doc_ids, float scale, const Tensor& out,
                              const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                              const Tensor& lse);
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                            float grad_scale, int32_t ignore_index, float label_smoothing,
                            const Tensor& losses);
void sum_rows(const Tensor& x, Tensor& out, bool accumulate);

}  // namespace vela::ops::cuda
