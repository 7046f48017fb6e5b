// Kernel micro-benchmarks (see bench_cuda.h): random inputs, warm-up, CUDA-event timing.
#include <algorithm>

#include "core/rng.h"
#include "ops/cuda/bench_cuda.h"
#include "ops/cuda/bench_timing.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

// Uniform values in [-1, 1) from Philox (seed, stream 0, index i).
template <typename T>
static __global__ void fill_uniform_kernel(T* out, int64_t n, uint64_t seed) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = from_float<T>(2.0f * philox_uniform(seed, 0, static_cast<uint64_t>(i)) - 1.0f);
}

namespace {

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype, Device::cuda(vela::cuda::current_device()));
  const int64_t n = t.numel();
  if (n == 0) return t;
  dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kThreads = 256;
    fill_uniform_kernel<T><<<grid_stride_blocks(n, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<T*>(t.data_ptr()), n, seed);
    VELA_CUDA_CHECK_LAUNCH();
  });
  return t;
}

}  // namespace

double bench_gemm_tflops(int m, int n, int k, DType dtype) {
  Tensor a = random_tensor({m, k}, dtype, 1);
  Tensor b = random_tensor({k, n}, dtype, 2);
  Tensor c = Tensor::empty({m, n}, dtype, a.device());
  const double ms = time_ms([&] { gemm(a, b, c, false, false, 1.0f, 0.0f); });
  return 2.0 * m * n * static_cast<double>(k) / (ms * 1e-3) / 1e12;
}

double bench_rms_norm_gbps(int64_t rows, int64_t hidden, DType dtype) {
  Tensor x = random_tensor({rows, hidden}, dtype, 3);
  Tensor w = random_tensor({hidden}, dtype, 4);
  Tensor out = Tensor::empty({rows, hidden}, dtype, x.device());
  const double ms = time_ms([&] { rms_norm(x, w, 1e-6f, out); });
  const double bytes = static_cast<double>(2 * rows * hidden + hidden) * dtype_size(dtype);
  return bytes / (ms * 1e-3) / 1e9;
}

double bench_copy_gbps(size_t bytes) {
  const Device device = Device::cuda(vela::cuda::current_device());
  Tensor src = Tensor::zeros({static_cast<int64_t>(bytes)}, DType::kU8, device);
  Tensor dst = Tensor::empty({static_cast<int64_t>(bytes)}, DType::kU8, device);
  const double ms = time_ms([&] {
    VELA_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyDeviceToDevice,
                                    current_stream()));
  });
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace vela::ops::cuda
