// CUDA backward entry points not yet implemented as kernels: a CUDA tensor reaching one of these
// is an Unsupported error naming the op (the CPU path is complete). Removed op by op as the
// kernels in ops/cuda/*_backward.cu land.
#include "core/error.h"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

namespace {
[[noreturn]] void pending(const char* op) {
  VELA_THROW(Unsupported, op, ": no CUDA kernel yet (train on --device cpu)");
}
}  // namespace

void rms_norm_backward(const Tensor&, const Tensor&, float, const Tensor&, Tensor&, Tensor&,
                       bool) {
  pending("rms_norm_backward");
}
void rotary_backward(Tensor&, const Tensor&, const Tensor&) { pending("rotary_backward"); }
void silu_and_mul_backward(const Tensor&, const Tensor&, Tensor&) {
  pending("silu_and_mul_backward");
}
void embedding_backward(const Tensor&, const Tensor&, Tensor&) { pending("embedding_backward"); }
void causal_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float,
                               const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&) {
  pending("causal_attention_backward");
}
void cross_entropy_backward(const Tensor&, const Tensor&, Tensor&, float, int32_t, float) {
  pending("cross_entropy_backward");
}
void sum_rows(const Tensor&, Tensor&, bool) { pending("sum_rows"); }

}  // namespace vela::ops::cuda
