// CUDA cross-entropy per row with ignore_index and label smoothing (torch semantics):
//   loss = (1 - eps) * (lse - x[t]) + eps * (lse - mean_j x_j),   0 where t == ignore_index.
// One block per row, one fp32 pass (online max/sum plus the row sum). Device targets are trusted:
// a target outside [0, vocab) that is not ignore_index gives NaN instead of a fault.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

namespace {

struct CrossEntropyArgs {
  int64_t n_rows;
  int64_t vocab;
  int64_t logits_stride;
  int64_t target_stride;
  int64_t loss_stride;
  int32_t ignore_index;
  float label_smoothing;
};

}  // namespace

template <typename T, int N>
static __global__ void cross_entropy_kernel(const T* __restrict__ logits,
                                            const int32_t* __restrict__ targets,
                                            float* __restrict__ losses, CrossEntropyArgs args) {
  __shared__ float smem[64];
  __shared__ float smem_sum[32];
  const int64_t n_vec = args.vocab / N;
  for (int64_t row = blockIdx.x; row < args.n_rows; row += gridDim.x) {
    const int32_t target = targets[row * args.target_stride];
    if (target == args.ignore_index) {  // uniform across the block: no barrier is skipped unevenly
      if (threadIdx.x == 0) losses[row * args.loss_stride] = 0.0f;
      continue;
    }
    const T* xr = logits + row * args.logits_stride;
    MaxSum stats;
    float sum_x = 0.0f;
    for (int64_t v = threadIdx.x; v < n_vec; v += blockDim.x) {
      float f[N];
      load_float<N>(xr + v * N, f);
#pragma unroll
      for (int i = 0; i < N; ++i) {
        max_sum_add(stats, f[i]);
        sum_x += f[i];
      }
    }
    stats = block_max_sum(stats, smem);
    sum_x = block_sum<true>(sum_x, smem_sum);
    if (threadIdx.x == 0) {
      float loss;
      if (target < 0 || target >= args.vocab) {
        loss = NAN;
      } else {
        const float lse = stats.m + logf(stats.s);
        const float nll = lse - to_float(xr[target]);
        loss = nll;
        if (args.label_smoothing != 0.0f) {
          const float smooth = lse - sum_x / static_cast<float>(args.vocab);
          loss = (1.0f - args.label_smoothing) * nll + args.label_smoothing * smooth;
        }
      }
      losses[row * args.loss_stride] = loss;
    }
  }
}

void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                   int32_t ignore_index, float label_smoothing) {
  RowLayout ll = row_layout(logits);
  CrossEntropyArgs args{ll.n_rows,
                        ll.n_cols,
                        ll.row_stride,
                        targets.dim() == 0 ? 1 : targets.stride(-1),
                        losses.dim() == 0 ? 1 : losses.stride(-1),
                        ignore_index,
                        label_smoothing};
  if (args.n_rows == 0) return;
  DeviceGuard guard(logits.device().index);
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = kVec16<T>;
    const T* px = static_cast<const T*>(logits.data_ptr());
    const int32_t* pt = static_cast<const int32_t*>(targets.data_ptr());
    float* pl = static_cast<float*>(losses.data_ptr());
    const bool vec = args.vocab % N == 0 && is_aligned(px, 16) && args.logits_stride % N == 0;
    const int threads = row_block_threads(vec ? args.vocab / N : args.vocab, 4);
    const int blocks = static_cast<int>(std::min<int64_t>(args.n_rows, 1 << 30));
    if (vec)
      cross_entropy_kernel<T, N><<<blocks, threads, 0, current_stream()>>>(px, pt, pl, args);
    else
      cross_entropy_kernel<T, 1><<<blocks, threads, 0, current_stream()>>>(px, pt, pl, args);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
