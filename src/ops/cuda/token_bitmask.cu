// CUDA apply_token_bitmask: one thread per token, blockIdx.y the mask row; a warp reads one mask
// word (a broadcast) and writes 32 neighbouring logits.

#include "ops/cuda/common.cuh"
#include "ops/token_bitmask.h"

namespace vela::ops::cuda {

static __global__ void apply_token_bitmask_kernel(float* logits, int64_t row_stride,
                                                  const uint32_t* bitmask, int64_t n_words,
                                                  const int32_t* row_ids, int64_t vocab) {
  const int64_t k = blockIdx.y;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= vocab) return;
  const uint32_t bits = bitmask[k * n_words + (t >> 5)];
  if (!((bits >> (t & 31)) & 1u))
    logits[static_cast<int64_t>(row_ids[k]) * row_stride + t] = __int_as_float(0xff800000);
}

void apply_token_bitmask(Tensor& logits, const Tensor& bitmask, const Tensor& row_ids) {
  const int64_t vocab = logits.size(1), n_masks = bitmask.size(0);
  DeviceGuard guard(logits.device().index);
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((vocab + kThreads - 1) / kThreads),
                  static_cast<unsigned>(n_masks));
  apply_token_bitmask_kernel<<<grid, kThreads, 0, current_stream()>>>(
      logits.data<float>(), logits.stride(0),
      reinterpret_cast<const uint32_t*>(bitmask.data<int32_t>()), bitmask.size(1),
      row_ids.data<int32_t>(), vocab);
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace vela::ops::cuda
