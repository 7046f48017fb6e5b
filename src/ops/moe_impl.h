// Backend entry points of ops/moe.h (inputs already validated by ops/moe.cpp): the CPU reference
// twins in cpu/moe.cpp and the CUDA kernels in cuda/moe.cu (current stream, no host
// synchronization). The list is written once (VELA_MOE_BACKEND_OPS) and declared in both
// namespaces, so the two backends cannot drift apart; semantics and shapes are in ops/moe.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"

#define VELA_MOE_BACKEND_OPS                                                                       \
  void moe_route(const Tensor& logits, int64_t k, bool normalize, Tensor& weights,                 \
                 Tensor& expert_ids);                                                              \
  void moe_route_backward(const Tensor& logits, const Tensor& expert_ids, const Tensor& dweights,  \
                          bool normalize, const Tensor& dprob_bias, float z_scale,                 \
                          Tensor& dlogits);                                                        \
  void moe_permute(const Tensor& expert_ids, int64_t n_experts, Tensor& offsets, Tensor& src_rows, \
                   Tensor& dst_rows);                                                              \
  void grouped_gemm(const Tensor& a, const Tensor& w, const Tensor& offsets, bool trans_w,         \
                    Tensor& out);                                                                  \
  void grouped_gemm_wgrad(const Tensor& dy, const Tensor& x, const Tensor& offsets, Tensor& dw);   \
  void moe_combine(const Tensor& y, const Tensor& dst_rows, const Tensor& weights,                 \
                   const Tensor& shared, const Tensor& shared_logit, Tensor& out);                 \
  void moe_combine_backward(const Tensor& dout, const Tensor& y, const Tensor& dst_rows,           \
                            const Tensor& weights, const Tensor& shared,                           \
                            const Tensor& shared_logit, Tensor& dy, Tensor& dweights,              \
                            Tensor& dshared, Tensor& dshared_logit);

namespace vela::ops {
namespace cpu {
VELA_MOE_BACKEND_OPS
}  // namespace cpu
#if defined(VELA_HAS_CUDA)
namespace cuda {
VELA_MOE_BACKEND_OPS
}  // namespace cuda
#endif
}  // namespace vela::ops

#undef VELA_MOE_BACKEND_OPS
