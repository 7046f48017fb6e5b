// CUDA-event timing for the kernel micro-benchmarks (bench_cuda.cu, bench_stream.cu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda/stream.h"

namespace vela::ops::cuda {

// Average milliseconds per call of `run` after warm-up, over enough calls for ~0.2 s.
template <typename F>
inline double time_ms(F&& run) {
  cudaStream_t stream = vela::cuda::current_stream();
  cudaEvent_t start, stop;
  VELA_CUDA_CHECK(cudaEventCreate(&start));
  VELA_CUDA_CHECK(cudaEventCreate(&stop));
  auto timed = [&](int n_iters) {
    VELA_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < n_iters; ++i) run();
    VELA_CUDA_CHECK(cudaEventRecord(stop, stream));
    VELA_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    VELA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms);
  };
  timed(3);  // warm-up: first-call setup (plans, caches, clocks)
  const double estimate = std::max(timed(1), 1e-3);
  const int n_iters = static_cast<int>(std::clamp(200.0 / estimate, 5.0, 2000.0));
  const double ms = timed(n_iters) / n_iters;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

}  // namespace vela::ops::cuda
