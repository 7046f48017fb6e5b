// CUDA cross_entropy backward: one block per row; online max / sum over the row (block_max_sum),
// then dlogits = grad_scale * (softmax - (1 - eps) * onehot - eps / vocab); 0 on ignored rows.
// dlogits (f32) may alias f32 logits: every element is read before the thread that owns it writes.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

template <typename T>
static __global__ void ce_backward_kernel(const T* logits, int64_t l_stride, const int32_t* targets,
                                          float* dlogits, int64_t g_stride, int64_t n_rows,
                                          int64_t vocab, float grad_scale, int32_t ignore_index,
                                          float eps) {
  __shared__ float smem[64];
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    const T* x = logits + row * l_stride;
    float* g = dlogits + row * g_stride;
    const int32_t tgt = targets[row];
    if (tgt == ignore_index) {
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) g[j] = 0.0f;
      continue;
    }
    MaxSum ms;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) max_sum_add(ms, to_float(x[j]));
    ms = block_max_sum(ms, smem);
    const float inv = 1.0f / ms.s, uniform = eps / static_cast<float>(vocab);
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      float p = __expf(to_float(x[j]) - ms.m) * inv - uniform;
      if (j == tgt) p -= 1.0f - eps;
      g[j] = grad_scale * p;
    }
  }
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                            float grad_scale, int32_t ignore_index, float label_smoothing) {
  DeviceGuard guard(logits.device().index);
  RowLayout xl = row_layout(logits), gl = row_layout(dlogits);
  if (xl.n_rows == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>(xl.n_rows, 65535));
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ce_backward_kernel<T><<<blocks, 512, 0, current_stream()>>>(
        static_cast<const T*>(logits.data_ptr()), xl.row_stride, targets.data<int32_t>(),
        dlogits.data<float>(), gl.row_stride, xl.n_rows, xl.n_cols, grad_scale, ignore_index,
        label_smoothing);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
