// CUDA LoRA ops (BGMV-style: every row reads its own adapter slot, so rows of different adapters
// share one launch): shrink = one block per row, one warp per rank index reducing over `in`;
// expand = one thread per output column with the row's xa staged in shared memory; dropout = a
// grid-stride loop over the hashed mask (the same hash as the CPU twin: identical masks). No host
// reads: graph-capturable.
#include "ops/cuda/common.cuh"
#include "ops/lora_hash.h"
#include "ops/lora_impl.h"

namespace vela::ops::cuda {

template <typename T>
static __global__ void lora_shrink_kernel(const T* x, int64_t x_stride, const T* a,
                                          const int32_t* slots, int64_t in, int64_t r, float* xa) {
  const int64_t i = blockIdx.x;
  const int s = slots[i];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
  for (int64_t k = warp; k < r; k += n_warps) {
    float acc = 0.0f;
    if (s >= 0) {
      const T* ar = a + (static_cast<int64_t>(s) * r + k) * in;
      const T* xr = x + i * x_stride;
      for (int64_t j = lane; j < in; j += 32) acc += to_float(xr[j]) * to_float(ar[j]);
      acc = warp_sum(acc);
    }
    if (lane == 0) xa[i * r + k] = acc;
  }
}

template <typename T>
static __global__ void lora_expand_kernel(const float* xa, const T* b, const int32_t* slots,
                                          const float* scales, int64_t n_cols, int64_t r, T* y,
                                          int64_t y_stride) {
  extern __shared__ float v[];  // [r]
  const int64_t i = blockIdx.y;
  const int s = slots[i];
  if (s < 0) return;
  for (int64_t k = threadIdx.x; k < r; k += blockDim.x) v[k] = xa[i * r + k];
  __syncthreads();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_cols) return;
  const T* br = b + (static_cast<int64_t>(s) * n_cols + c) * r;
  float acc = 0.0f;
  for (int64_t k = 0; k < r; ++k) acc += to_float(br[k]) * v[k];
  T* yp = y + i * y_stride + c;
  *yp = from_float<T>(to_float(*yp) + scales[s] * acc);
}

template <typename T>
static __global__ void lora_dropout_kernel(const T* x, int64_t x_stride, T* out, int64_t o_stride,
                                           int64_t n_rows, int64_t n_cols, uint64_t seed,
                                           uint64_t stream, float p) {
  const int64_t total = n_rows * n_cols;
  const float keep_scale = 1.0f / (1.0f - p);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / n_cols, j = e % n_cols;
    const bool keep = lora_uniform(seed, stream, static_cast<uint64_t>(e)) >= p;
    const float val = to_float(x[i * x_stride + j]);
    out[i * o_stride + j] = from_float<T>(keep ? val * keep_scale : 0.0f);
  }
}

void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, Tensor& xa) {
  const RowLayout xl = row_layout(x);
  const int64_t r = a.size(1);
  if (xl.n_rows == 0 || r == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int threads = static_cast<int>(32 * std::clamp<int64_t>(r, 1, 8));
    lora_shrink_kernel<T><<<static_cast<unsigned>(xl.n_rows), threads, 0, current_stream()>>>(
        static_cast<const T*>(x.data_ptr()), xl.row_stride, static_cast<const T*>(a.data_ptr()),
        slots.data<int32_t>(), xl.n_cols, r, xa.data<float>());
    VELA_CUDA_CHECK_LAUNCH();
  });
}

void lora_expand(const Tensor& xa, const Tensor& b, const Tensor& slots, const Tensor& scales,
                 Tensor& y) {
  const RowLayout yl = row_layout(y);
  const int64_t r = b.size(2);
  if (yl.n_rows == 0 || yl.n_cols == 0) return;
  VELA_CHECK(yl.n_rows <= 65535, "lora_expand: ", yl.n_rows, " rows exceed the grid limit 65535");
  DeviceGuard guard(y.device().index);
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int kThreads = 128;
    dim3 grid(static_cast<unsigned>(ceil_div(yl.n_cols, kThreads)),
              static_cast<unsigned>(yl.n_rows));
    const size_t smem = static_cast<size_t>(std::max<int64_t>(r, 1)) * sizeof(float);
    lora_expand_kernel<T><<<grid, kThreads, smem, current_stream()>>>(
        xa.data<float>(), static_cast<const T*>(b.data_ptr()), slots.data<int32_t>(),
        scales.data<float>(), yl.n_cols, r, static_cast<T*>(y.data_ptr()), yl.row_stride);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

void lora_dropout(const Tensor& x, uint64_t seed, uint64_t stream, float p, Tensor& out) {
  const RowLayout xl = row_layout(x), ol = row_layout(out);
  if (xl.n_rows == 0 || xl.n_cols == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int kThreads = 256;
    const int blocks = grid_stride_blocks(xl.n_rows * xl.n_cols, kThreads);
    lora_dropout_kernel<T><<<blocks, kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x.data_ptr()), xl.row_stride, static_cast<T*>(out.data_ptr()),
        ol.row_stride, xl.n_rows, xl.n_cols, seed, stream, p);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
