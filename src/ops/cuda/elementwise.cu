// CUDA elementwise arithmetic: add, mul (b same shape or 1-D broadcast over rows) and scale.
// fp32 math, one rounding on store; 16-byte vectors when every pointer (and the broadcast period)
// allows, scalar otherwise; grid-stride loops sized for the device.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

enum class BinaryOp { kAdd, kMul };

template <BinaryOp kOp>
static __device__ __forceinline__ float apply_binary(float a, float b) {
  if constexpr (kOp == BinaryOp::kAdd)
    return a + b;
  else
    return a * b;
}

// out[i] = a[i] op b[i % b_period]; N elements per vector step, scalar tail.
template <typename T, BinaryOp kOp, int N, bool kBroadcast>
static __global__ void binary_kernel(const T* a, const T* b, T* out, int64_t n, int64_t b_period) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_vec = n / N;
  for (int64_t v = tid; v < n_vec; v += step) {
    int64_t i = v * N;
    float x[N], y[N];
    load_float<N>(a + i, x);
    load_float<N>(b + (kBroadcast ? i % b_period : i), y);
#pragma unroll
    for (int j = 0; j < N; ++j) x[j] = apply_binary<kOp>(x[j], y[j]);
    store_float<N>(out + i, x);
  }
  for (int64_t i = n_vec * N + tid; i < n; i += step) {
    float x = to_float(a[i]);
    float y = to_float(b[kBroadcast ? i % b_period : i]);
    out[i] = from_float<T>(apply_binary<kOp>(x, y));
  }
}

template <typename T, int N>
static __global__ void scale_kernel(const T* x, float s, T* out, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_vec = n / N;
  for (int64_t v = tid; v < n_vec; v += step) {
    float y[N];
    load_float<N>(x + v * N, y);
#pragma unroll
    for (int j = 0; j < N; ++j) y[j] *= s;
    store_float<N>(out + v * N, y);
  }
  for (int64_t i = n_vec * N + tid; i < n; i += step) out[i] = from_float<T>(s * to_float(x[i]));
}

namespace {

constexpr int kThreads = 256;

template <BinaryOp kOp>
void launch_binary(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = a.numel();
  if (n == 0) return;
  DeviceGuard guard(a.device().index);
  const bool broadcast = b.numel() != n;
  const int64_t b_period = b.numel();
  dispatch_float(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = kVec16<T>;
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    const bool vec = is_aligned(pa, 16) && is_aligned(pb, 16) && is_aligned(po, 16) &&
                     (!broadcast || b_period % N == 0);
    const int blocks = grid_stride_blocks(vec ? n / N : n, kThreads);
    cudaStream_t stream = current_stream();
    if (vec && broadcast)
      binary_kernel<T, kOp, N, true><<<blocks, kThreads, 0, stream>>>(pa, pb, po, n, b_period);
    else if (vec)
      binary_kernel<T, kOp, N, false><<<blocks, kThreads, 0, stream>>>(pa, pb, po, n, b_period);
    else if (broadcast)
      binary_kernel<T, kOp, 1, true><<<blocks, kThreads, 0, stream>>>(pa, pb, po, n, b_period);
    else
      binary_kernel<T, kOp, 1, false><<<blocks, kThreads, 0, stream>>>(pa, pb, po, n, b_period);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  launch_binary<BinaryOp::kAdd>(a, b, out);
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
  launch_binary<BinaryOp::kMul>(a, b, out);
}

void scale(const Tensor& x, float s, Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = kVec16<T>;
    const T* px = static_cast<const T*>(x.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    const bool vec = is_aligned(px, 16) && is_aligned(po, 16);
    const int blocks = grid_stride_blocks(vec ? n / N : n, kThreads);
    if (vec)
      scale_kernel<T, N><<<blocks, kThreads, 0, current_stream()>>>(px, s, po, n);
    else
      scale_kernel<T, 1><<<blocks, kThreads, 0, current_stream()>>>(px, s, po, n);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
