// CUDA backward of the memory-bound elementwise ops: rotary (rotation by -theta), silu_and_mul,
// embedding (f32 atomic scatter-add: repeated ids add up in any order), and sum_rows (one thread
// per column, rows in order: deterministic). Math in fp32.
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

template <typename T>
static __global__ void silu_mul_backward_kernel(const T* x, int64_t x_stride, const T* dout,
                                                int64_t d_stride, T* dx, int64_t dx_stride,
                                                int64_t n_rows, int64_t inter) {
  const int64_t total = n_rows * inter;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / inter, i = idx % inter;
    const float g = to_float(x[r * x_stride + i]), u = to_float(x[r * x_stride + inter + i]);
    const float d = to_float(dout[r * d_stride + i]);
    const float s = 1.0f / (1.0f + __expf(-g));
    dx[r * dx_stride + i] = from_float<T>(d * u * s * (1.0f + g * (1.0f - s)));
    dx[r * dx_stride + inter + i] = from_float<T>(d * g * s);
  }
}

void silu_and_mul_backward(const Tensor& x, const Tensor& dout, Tensor& dx) {
  DeviceGuard guard(x.device().index);
  RowLayout xl = row_layout(x), dl = row_layout(dout), gl = row_layout(dx);
  const int64_t total = dl.n_rows * dl.n_cols;
  if (total == 0) return;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    silu_mul_backward_kernel<T><<<grid_stride_blocks(total, 256), 256, 0, current_stream()>>>(
        static_cast<const T*>(x.data_ptr()), xl.row_stride, static_cast<const T*>(dout.data_ptr()),
        dl.row_stride, static_cast<T*>(dx.data_ptr()), gl.row_stride, dl.n_rows, dl.n_cols);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

template <typename T>
static __global__ void embedding_backward_kernel(const int32_t* ids, const T* dout,
                                                 int64_t d_stride, int64_t n_tokens, int64_t hidden,
                                                 float* dweight) {
  const int64_t total = n_tokens * hidden;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / hidden, c = idx % hidden;
    atomicAdd(dweight + static_cast<int64_t>(ids[t]) * hidden + c,
              to_float(dout[t * d_stride + c]));
  }
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight) {
  DeviceGuard guard(dweight.device().index);
  RowLayout dl = row_layout(dout);
  const int64_t n_tokens = ids.size(0), hidden = dweight.size(1), total = n_tokens * hidden;
  if (total == 0) return;
  dispatch_float(dout.dtype(), [&](auto tag) {
    using T = decltype(tag);
    embedding_backward_kernel<T><<<grid_stride_blocks(total, 256), 256, 0, current_stream()>>>(
        ids.data<int32_t>(), static_cast<const T*>(dout.data_ptr()), dl.row_stride, n_tokens,
        hidden, dweight.data<float>());
    VELA_CUDA_CHECK_LAUNCH();
  });
}

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
