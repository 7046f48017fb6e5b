// Backend entry points of ops/lora.h (inputs already validated by ops/lora.cpp): cpu/lora.cpp and
// cuda/lora.cu. Kept out of cpu_ops.h / cuda_ops.h so the LoRA ops stay in their own files.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela::ops {
namespace cpu {
void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, Tensor& xa);
void lora_expand(const Tensor& xa, const Tensor& b, const Tensor& slots, const Tensor& scales,
                 Tensor& y);
void lora_dropout(const Tensor& x, uint64_t seed, uint64_t stream, float p, Tensor& out);
}  // namespace cpu
#if defined(VELA_HAS_CUDA)
namespace cuda {
void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, Tensor& xa);
void lora_expand(const Tensor& xa, const Tensor& b, const Tensor& slots, const Tensor& scales,
                 Tensor& y);
void lora_dropout(const Tensor& x, uint64_t seed, uint64_t stream, float p, Tensor& out);
}  // namespace cuda
#endif
}  // namespace vela::ops
