// Backend entry points behind the public ops in ops/*.h: CUDA implementations: kernels in ops/cuda/*.cu, launched on core/cuda/stream.h's current stream.
// Called only by the dispatchers in ops/*.cpp after they validated shapes, dtypes and devices, so
// these functions assume valid arguments. Semantics and shapes are documented in ops/*.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela::ops::cuda {

void gemm(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha,
          float beta);
void add(const Tensor& a, const Tensor& b, Tensor& out);
void mul(const Tensor& a, const Tensor& b, Tensor& out);
void scale(const Tensor& x, float s, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out);
void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out);
void rotary(Tensor& x, const Tensor& positions, const Tensor& table);
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
void embedding(const Tensor& weight, const Tensor& ids, Tensor& out);
void softmax(const Tensor& x, Tensor& out);
void log_softmax(const Tensor& x, Tensor& out);
void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int64_t k, Tensor& values, Tensor& indices);
void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                   int32_t ignore_index, float label_smoothing);
void cast(const Tensor& x, Tensor& out);

}  // namespace vela::ops::cuda
