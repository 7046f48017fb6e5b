// CUDA softmax / log-softmax over the last dim: one block per row, fp32 online max/sum in one
// read, then a second read (from L2 for large rows) that writes the output in f32 or x's dtype.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

namespace {

struct SoftmaxArgs {
  int64_t n_rows;
  int64_t n_cols;
  int64_t x_stride;
  int64_t out_stride;
};

}  // namespace

template <typename T, typename Tout, bool kLog, int N>
static __global__ void softmax_kernel(const T* __restrict__ x, Tout* __restrict__ out,
                                      SoftmaxArgs args) {
  __shared__ float smem[64];
  const int64_t n_vec = args.n_cols / N;
  for (int64_t row = blockIdx.x; row < args.n_rows; row += gridDim.x) {
    const T* xr = x + row * args.x_stride;
    Tout* outr = out + row * args.out_stride;
    MaxSum stats;
    for (int64_t v = threadIdx.x; v < n_vec; v += blockDim.x) {
      float f[N];
      load_float<N>(xr + v * N, f);
#pragma unroll
      for (int i = 0; i < N; ++i) max_sum_add(stats, f[i]);
    }
    stats = block_max_sum(stats, smem);
    const float m = stats.m;
    const float inv_sum = 1.0f / stats.s;
    const float log_sum = logf(stats.s);
    for (int64_t v = threadIdx.x; v < n_vec; v += blockDim.x) {
      float f[N];
      load_float<N>(xr + v * N, f);
#pragma unroll
      for (int i = 0; i < N; ++i) f[i] = kLog ? f[i] - m - log_sum : expf(f[i] - m) * inv_sum;
      store_float<N>(outr + v * N, f);
    }
  }
}

namespace {

template <bool kLog>
void launch_softmax(const Tensor& x, Tensor& out) {
  RowLayout xl = row_layout(x), ol = row_layout(out);
  SoftmaxArgs args{xl.n_rows, xl.n_cols, xl.row_stride, ol.row_stride};
  if (args.n_rows == 0 || args.n_cols == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto go = [&](auto out_tag) {
      using Tout = decltype(out_tag);
      constexpr int N = sizeof(T) == 2 || sizeof(Tout) == 2 ? 8 : 4;
      const T* px = static_cast<const T*>(x.data_ptr());
      Tout* po = static_cast<Tout*>(out.data_ptr());
      const bool vec = args.n_cols % N == 0 && is_aligned(px, 16) && is_aligned(po, 16) &&
                       args.x_stride % N == 0 && args.out_stride % N == 0;
      const int threads = row_block_threads(vec ? args.n_cols / N : args.n_cols, 4);
      const int blocks = static_cast<int>(std::min<int64_t>(args.n_rows, 1 << 30));
      if (vec)
        softmax_kernel<T, Tout, kLog, N><<<blocks, threads, 0, current_stream()>>>(px, po, args);
      else
        softmax_kernel<T, Tout, kLog, 1><<<blocks, threads, 0, current_stream()>>>(px, po, args);
      VELA_CUDA_CHECK_LAUNCH();
    };
    if (out.dtype() == DType::kF32)
      go(float{});
    else
      go(T{});
  });
}

}  // namespace

void softmax(const Tensor& x, Tensor& out) { launch_softmax<false>(x, out); }

void log_softmax(const Tensor& x, Tensor& out) { launch_softmax<true>(x, out); }

}  // namespace vela::ops::cuda
