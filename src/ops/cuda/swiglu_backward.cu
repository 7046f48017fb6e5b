// CUDA silu_and_mul backward: d(gate) and d(up) of out = silu(gate) * up, math in fp32.
// CPU twin: ops/cpu/swiglu_backward.cpp.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

// grid.x covers a row's inter columns in chunks of blockDim.x * N; grid.y strides over rows
// (no 64-bit division per element; N = 16 bytes of T when the layout allows vector access).
struct SiluMulBwdArgs {
  int64_t n_rows, inter, x_stride, d_stride, dx_stride;
};

template <typename T, int N>
static __global__ void silu_mul_backward_kernel(const T* x, const T* dout, T* dx,
                                                SiluMulBwdArgs a) {
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (col >= a.inter) return;
  for (int64_t row = blockIdx.y; row < a.n_rows; row += gridDim.y) {
    float g[N], u[N], d[N], dg[N], du[N];
    load_float<N>(x + row * a.x_stride + col, g);
    load_float<N>(x + row * a.x_stride + a.inter + col, u);
    load_float<N>(dout + row * a.d_stride + col, d);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float s = 1.0f / (1.0f + __expf(-g[i]));
      dg[i] = d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
      du[i] = d[i] * g[i] * s;
    }
    store_float<N>(dx + row * a.dx_stride + col, dg);
    store_float<N>(dx + row * a.dx_stride + a.inter + col, du);
  }
}

void silu_and_mul_backward(const Tensor& x, const Tensor& dout, Tensor& dx) {
  DeviceGuard guard(x.device().index);
  RowLayout xl = row_layout(x), dl = row_layout(dout), gl = row_layout(dx);
  SiluMulBwdArgs a{dl.n_rows, dl.n_cols, xl.row_stride, dl.row_stride, gl.row_stride};
  if (a.n_rows == 0 || a.inter == 0) return;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = kVec16<T>;
    const T* px = static_cast<const T*>(x.data_ptr());
    const T* pd = static_cast<const T*>(dout.data_ptr());
    T* pg = static_cast<T*>(dx.data_ptr());
    const bool vec = a.inter % N == 0 && is_aligned(px, 16) && is_aligned(pd, 16) &&
                     is_aligned(pg, 16) && a.x_stride % N == 0 && a.d_stride % N == 0 &&
                     a.dx_stride % N == 0;
    constexpr int kThreads = 256;
    const int64_t per_row = ceil_div(a.inter, vec ? N : 1);
    dim3 grid(static_cast<unsigned>(ceil_div(per_row, kThreads)),
              static_cast<unsigned>(std::min<int64_t>(a.n_rows, 65535)));
    if (vec)
      silu_mul_backward_kernel<T, N><<<grid, kThreads, 0, current_stream()>>>(px, pd, pg, a);
    else
      silu_mul_backward_kernel<T, 1><<<grid, kThreads, 0, current_stream()>>>(px, pd, pg, a);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
