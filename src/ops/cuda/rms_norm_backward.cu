// CUDA rms_norm backward. Three small kernels so dx may alias dout and dw needs no atomics:
//   rstd:  one block per row, r = 1/rms(x) into a f32 scratch row
//   dw:    partial column sums over row chunks (one thread per column and chunk), then the
//          chunks summed in order (deterministic, no atomics): dw += sum(dout * x * r)
//   dx:    one block per row, dx (+)= r * (dout * w - x * r * mean(dout * w * x * r))
// Math in fp32; x / dout / dx in T (f32, bf16, f16), w in f32 or T, dw f32.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

template <typename T>
static __global__ void rstd_kernel(const T* x, int64_t x_stride, int64_t n_rows, int64_t n_cols,
                                   float eps, float* rstd) {
  __shared__ float smem[32];
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    const T* xr = x + row * x_stride;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
      const float v = to_float(xr[i]);
      ss += v * v;
    }
    ss = block_sum<true>(ss, smem);
    if (threadIdx.x == 0) rstd[row] = rsqrtf(ss / static_cast<float>(n_cols) + eps);
  }
}

// Partial column sums over one chunk of rows: partial[chunk, c] = sum over the chunk's rows of
// dout * x * r (grid: column blocks x row chunks).
template <typename T>
static __global__ void rms_dw_partial_kernel(const T* x, int64_t x_stride, const T* dout,
                                             int64_t d_stride, const float* rstd, int64_t n_rows,
                                             int64_t n_cols, int64_t rows_per_chunk,
                                             float* partial) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_cols) return;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(n_rows, r0 + rows_per_chunk);
  float acc = 0.0f;
  for (int64_t r = r0; r < r1; ++r)
    acc += to_float(dout[r * d_stride + c]) * to_float(x[r * x_stride + c]) * rstd[r];
  partial[static_cast<int64_t>(blockIdx.y) * n_cols + c] = acc;
}

// dw[c] += sum over chunks of partial[chunk, c], chunks in order (deterministic).
static __global__ void rms_dw_reduce_kernel(const float* partial, int64_t n_chunks, int64_t n_cols,
                                            float* dw) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_cols) return;
  float acc = 0.0f;
  for (int64_t k = 0; k < n_chunks; ++k) acc += partial[k * n_cols + c];
  dw[c] += acc;
}

template <typename T, typename W>
static __global__ void rms_dx_kernel(const T* x, int64_t x_stride, const W* w, const T* dout,
                                     int64_t d_stride, const float* rstd, int64_t n_rows,
                                     int64_t n_cols, T* dx, int64_t dx_stride, bool accumulate) {
  __shared__ float smem[32];
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    const T* xr = x + row * x_stride;
    const T* dr = dout + row * d_stride;
    T* dxr = dx + row * dx_stride;
    const float r = rstd[row];
    float dot = 0.0f;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x)
      dot += to_float(dr[i]) * to_float(w[i]) * to_float(xr[i]) * r;
    dot = block_sum<true>(dot, smem);
    const float m = dot / static_cast<float>(n_cols);
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
      float g = r * (to_float(dr[i]) * to_float(w[i]) - to_float(xr[i]) * r * m);
      if (accumulate) g += to_float(dxr[i]);
      dxr[i] = from_float<T>(g);
    }
  }
}

void rms_norm_backward(const Tensor& x, const Tensor& w, float eps, const Tensor& dout, Tensor& dx,
                       Tensor& dw, bool accumulate_dx) {
  DeviceGuard guard(x.device().index);
  RowLayout xl = row_layout(x), dl = row_layout(dout), gl = row_layout(dx);
  if (xl.n_rows == 0 || xl.n_cols == 0) return;
  cudaStream_t stream = current_stream();
  Tensor rstd = Tensor::empty({xl.n_rows}, DType::kF32, x.device());
  float* pr = rstd.data<float>();
  const int threads = row_block_threads(xl.n_cols, 4, 256);
  const int blocks = static_cast<int>(std::min<int64_t>(xl.n_rows, 65535));
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.data_ptr());
    const T* pd = static_cast<const T*>(dout.data_ptr());
    T* pg = static_cast<T*>(dx.data_ptr());
    rstd_kernel<T>
        <<<blocks, threads, 0, stream>>>(px, xl.row_stride, xl.n_rows, xl.n_cols, eps, pr);
    VELA_CUDA_CHECK_LAUNCH();
    if (dw.defined()) {
      // Enough row chunks to fill the device; each chunk at least 32 rows.
      const int64_t col_blocks = ceil_div(xl.n_cols, 128);
      const int64_t n_chunks = std::clamp<int64_t>(
          std::min(ceil_div(xl.n_rows, 32), ceil_div(4 * n_sms(), col_blocks)), 1, 65535);
      const int64_t rows_per_chunk = ceil_div(xl.n_rows, n_chunks);
      Tensor partial = Tensor::empty({n_chunks, xl.n_cols}, DType::kF32, x.device());
      rms_dw_partial_kernel<T>
          <<<dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(n_chunks)), 128, 0,
             stream>>>(px, xl.row_stride, pd, dl.row_stride, pr, xl.n_rows, xl.n_cols,
                       rows_per_chunk, partial.data<float>());
      VELA_CUDA_CHECK_LAUNCH();
      rms_dw_reduce_kernel<<<static_cast<unsigned>(col_blocks), 128, 0, stream>>>(
          partial.data<float>(), n_chunks, xl.n_cols, dw.data<float>());
      VELA_CUDA_CHECK_LAUNCH();
    }
    if (w.dtype() == DType::kF32) {
      rms_dx_kernel<T, float><<<blocks, threads, 0, stream>>>(
          px, xl.row_stride, w.data<float>(), pd, dl.row_stride, pr, xl.n_rows, xl.n_cols, pg,
          gl.row_stride, accumulate_dx);
    } else {
      rms_dx_kernel<T, T><<<blocks, threads, 0, stream>>>(
          px, xl.row_stride, static_cast<const T*>(w.data_ptr()), pd, dl.row_stride, pr, xl.n_rows,
          xl.n_cols, pg, gl.row_stride, accumulate_dx);
    }
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
