// Thread-local current stream per device, the DeviceGuard, and the cached device properties.
// The current stream defaults to the legacy default stream (0) on every device and thread.
#include "core/cuda/stream.h"

#include <array>
#include <memory>
#include <mutex>

namespace vela::cuda {

namespace {

constexpr int kMaxDevices = 64;

thread_local std::array<cudaStream_t, kMaxDevices> t_streams{};  // all nullptr = stream 0

int checked_device_index(int device) {
  VELA_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
  return device;
}

}  // namespace

int current_device() {
  int device = 0;
  VELA_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

cudaStream_t current_stream() { return t_streams[checked_device_index(current_device())]; }

void set_current_stream(cudaStream_t stream) {
  t_streams[checked_device_index(current_device())] = stream;
}

DeviceGuard::DeviceGuard(int device) {
  int current = current_device();
  if (current != device) {
    VELA_CUDA_CHECK(cudaSetDevice(device));
    prev_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) cudaSetDevice(prev_);  // a destructor must not throw; nothing to do on error
}

const cudaDeviceProp& device_properties(int device) {
  static std::mutex mu;
  static std::array<std::unique_ptr<cudaDeviceProp>, kMaxDevices> cache;
  if (device < 0) device = current_device();
  checked_device_index(device);
  std::lock_guard<std::mutex> lock(mu);
  if (!cache[device]) {
    auto prop = std::make_unique<cudaDeviceProp>();
    VELA_CUDA_CHECK(cudaGetDeviceProperties(prop.get(), device));
    cache[device] = std::move(prop);
  }
  return *cache[device];
}

}  // namespace vela::cuda
