// CUDA sum_rows: one thread per column, rows added in order (deterministic), math in fp32.
// CPU twin: ops/cpu/reduce.cpp.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

template <typename T>
static __global__ void sum_rows_kernel(const T* x, int64_t stride, int64_t n_rows, int64_t n_cols,
                                       float* out, bool accumulate) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_cols) return;
  float acc = 0.0f;
  for (int64_t r = 0; r < n_rows; ++r) acc += to_float(x[r * stride + c]);
  out[c] = accumulate ? out[c] + acc : acc;
}

void sum_rows(const Tensor& x, Tensor& out, bool accumulate) {
  DeviceGuard guard(x.device().index);
  RowLayout xl = row_layout(x);
  if (xl.n_cols == 0) return;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    sum_rows_kernel<T><<<static_cast<int>(ceil_div(xl.n_cols, 128)), 128, 0, current_stream()>>>(
        static_cast<const T*>(x.data_ptr()), xl.row_stride, xl.n_rows, xl.n_cols, out.data<float>(),
        accumulate);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
