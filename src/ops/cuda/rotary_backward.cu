// CUDA rotary backward: the gradient rotated by -theta (the rotation is orthogonal), in place.
// CPU twin: ops/cpu/rotary_backward.cpp. Math in fp32.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

template <typename T>
static __global__ void rotary_backward_kernel(T* dx, int64_t token_stride, const int32_t* pos,
                                              const float* table, int64_t n_tokens, int64_t n_heads,
                                              int64_t head_dim, int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  const int64_t total = n_tokens * n_heads * half;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half, h = (idx / half) % n_heads, t = idx / (half * n_heads);
    const float* cs = table + static_cast<int64_t>(pos[t]) * rotary_dim;
    const float c = cs[i], s = cs[half + i];
    T* v = dx + t * token_stride + h * head_dim;
    const float d1 = to_float(v[i]), d2 = to_float(v[half + i]);
    v[i] = from_float<T>(d1 * c + d2 * s);
    v[half + i] = from_float<T>(d2 * c - d1 * s);
  }
}

void rotary_backward(Tensor& dx, const Tensor& positions, const Tensor& table) {
  DeviceGuard guard(dx.device().index);
  const int64_t n_tokens = dx.size(0), n_heads = dx.size(1), head_dim = dx.size(2);
  const int64_t rotary_dim = table.size(1);
  const int64_t total = n_tokens * n_heads * (rotary_dim / 2);
  if (total == 0) return;
  dispatch_float(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rotary_backward_kernel<T><<<grid_stride_blocks(total, 256), 256, 0, current_stream()>>>(
        static_cast<T*>(dx.data_ptr()), dx.stride(0), positions.data<int32_t>(),
        table.data<float>(), n_tokens, n_heads, head_dim, rotary_dim);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
