// CUDA stream handling for kernels and launchers (.cu files and CUDA-aware .cpp files only).
//
// Each host thread has a current stream per device (default: the legacy default stream 0);
// current_stream() / set_current_stream() act on the thread's current device.
// StreamGuard swaps it for a scope, so the engine can run on its own stream and CUDA-graph capture
// sees every launch. VELA_CUDA_CHECK turns a cudaError_t into a vela::CudaError with file:line.
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

#define VELA_CUDA_CHECK(expr)                                                               \
  do {                                                                                      \
    cudaError_t vela_err_ = (expr);                                                         \
    if (vela_err_ != cudaSuccess) [[unlikely]]                                              \
      ::vela::detail::throw_at<::vela::CudaError>(__FILE__, __LINE__, #expr ": ",           \
                                                  cudaGetErrorString(vela_err_));           \
  } while (0)

// After a kernel launch: reports launch-configuration errors without synchronizing.
#define VELA_CUDA_CHECK_LAUNCH() VELA_CUDA_CHECK(cudaGetLastError())

namespace vela::cuda {

cudaStream_t current_stream();
void set_current_stream(cudaStream_t stream);

class StreamGuard {
 public:
  explicit StreamGuard(cudaStream_t stream) : prev_(current_stream()) { set_current_stream(stream); }
  ~StreamGuard() { set_current_stream(prev_); }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  cudaStream_t prev_;
};

// Properties cached per device (SM count, L2 size, max shared memory per block opt-in).
const cudaDeviceProp& device_properties(int device = -1);  // -1: the current device

// The calling thread's current CUDA device (cudaGetDevice, checked).
int current_device();

// Makes `device` current for a scope (no runtime call when it already is). Launchers use it so a
// tensor on cuda:1 runs on device 1 whatever the thread's current device is.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;  // -1: nothing to restore
};

}  // namespace vela::cuda
