// Backend entry points of ops/lora.h (inputs already validated by ops/lora.cpp): cpu/lora.cpp and
// cuda/lora.cu. Kept out of cpu_ops.h / cuda_ops.h so the LoRA ops stay in their own files; the
// list is written once (VELA_LORA_BACKEND_OPS) and declared in both namespaces (as ops/moe_impl.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/lora.h"

#define VELA_LORA_BACKEND_OPS                                                                    \
  void lora_shrink(const Tensor& x, const LoraSegments& segs, const Tensor& slots, Tensor& xa);  \
  void lora_expand(const Tensor& xa, const LoraSegments& segs, const Tensor& slots,             \
                   const Tensor& scales);                                                        \
  void lora_dropout(const Tensor& x, uint64_t seed, uint64_t stream, float p, Tensor& out);

namespace vela::ops {
namespace cpu {
VELA_LORA_BACKEND_OPS
}  // namespace cpu
#if defined(VELA_HAS_CUDA)
namespace cuda {
VELA_LORA_BACKEND_OPS
}  // namespace cuda
#endif
}  // namespace vela::ops

#undef VELA_LORA_BACKEND_OPS
