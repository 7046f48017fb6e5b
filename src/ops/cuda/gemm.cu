// The one kernel of the CUDA GEMM: c *= beta for a GEMM with K = 0 (cuBLASLt, in
// gemm_cublaslt.cpp, does every other case).
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

// c[b, i, j] *= beta (beta == 0 writes zeros, so NaN in c does not survive): the k == 0 GEMM.
template <typename T>
static __global__ void scale_matrix_kernel(T* c, float beta, int64_t n_batch, int64_t n_rows,
                                           int64_t n_cols, int64_t batch_stride,
                                           int64_t row_stride) {
  const int64_t n = n_batch * n_rows * n_cols;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t col = i % n_cols, row = (i / n_cols) % n_rows, batch = i / (n_cols * n_rows);
    T& v = c[batch * batch_stride + row * row_stride + col];
    v = from_float<T>(beta == 0.0f ? 0.0f : beta * to_float(v));
  }
}

namespace {

template <typename T>
void scale_c(Tensor& c, float beta, int64_t n_batch, int64_t m, int64_t n) {
  constexpr int kThreads = 256;
  const int64_t batch_stride = c.dim() == 3 ? c.stride(0) : 0;
  scale_matrix_kernel<T>
      <<<grid_stride_blocks(n_batch * m * n, kThreads), kThreads, 0, current_stream()>>>(
          static_cast<T*>(c.data_ptr()), beta, n_batch, m, n, batch_stride, c.stride(-2));
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gemm_scale_c(Tensor& c, float beta, int64_t n_batch, int64_t m, int64_t n) {
  dispatch_float(c.dtype(), [&](auto tag) { scale_c<decltype(tag)>(c, beta, n_batch, m, n); });
}

}  // namespace vela::ops::cuda
