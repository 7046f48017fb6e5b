// CUDA cast between f32 / bf16 / f16 (fp32 intermediate, round to nearest even via the hardware
// cvt instructions) and same-dtype copies of any dtype (cudaMemcpyAsync; cudaMemcpy2DAsync for
// row-strided tensors). Conversions take contiguous tensors.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

template <typename Tin, typename Tout, int N>
static __global__ void cast_kernel(const Tin* x, Tout* out, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_vec = n / N;
  for (int64_t v = tid; v < n_vec; v += step) {
    float y[N];
    load_float<N>(x + v * N, y);
    store_float<N>(out + v * N, y);
  }
  for (int64_t i = n_vec * N + tid; i < n; i += step) out[i] = from_float<Tout>(to_float(x[i]));
}

void cast(const Tensor& x, Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  DeviceGuard guard(x.device().index);
  if (x.dtype() == out.dtype()) {
    if (x.data_ptr() == out.data_ptr()) return;
    if (x.is_contiguous() && out.is_contiguous()) {
      VELA_CUDA_CHECK(cudaMemcpyAsync(out.data_ptr(), x.data_ptr(), x.nbytes(),
                                      cudaMemcpyDeviceToDevice, current_stream()));
      return;
    }
    // Row-strided (checked by ops::cast): one 2-D copy, pitches in bytes.
    const RowLayout rx = row_layout(x), ro = row_layout(out);
    const size_t es = x.element_size();
    VELA_CUDA_CHECK(cudaMemcpy2DAsync(out.data_ptr(), static_cast<size_t>(ro.row_stride) * es,
                                      x.data_ptr(), static_cast<size_t>(rx.row_stride) * es,
                                      static_cast<size_t>(rx.n_cols) * es,
                                      static_cast<size_t>(rx.n_rows), cudaMemcpyDeviceToDevice,
                                      current_stream()));
    return;
  }
  dispatch_float(x.dtype(), [&](auto in_tag) {
    dispatch_float(out.dtype(), [&](auto out_tag) {
      using Tin = decltype(in_tag);
      using Tout = decltype(out_tag);
      // 8 elements per step for any pair involving a 16-bit type (16-byte loads or stores).
      constexpr int N = sizeof(Tin) == 2 || sizeof(Tout) == 2 ? 8 : 4;
      const Tin* px = static_cast<const Tin*>(x.data_ptr());
      Tout* po = static_cast<Tout*>(out.data_ptr());
      const bool vec = is_aligned(px, 16) && is_aligned(po, 16);
      constexpr int kThreads = 256;
      const int blocks = grid_stride_blocks(vec ? n / N : n, kThreads);
      if (vec)
        cast_kernel<Tin, Tout, N><<<blocks, kThreads, 0, current_stream()>>>(px, po, n);
      else
        cast_kernel<Tin, Tout, 1><<<blocks, kThreads, 0, current_stream()>>>(px, po, n);
      VELA_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace vela::ops::cuda
