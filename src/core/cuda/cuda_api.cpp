// Host-side CUDA services declared in cuda_api.h: device discovery, allocator front end, copies.
// Copies run on the current stream of the device involved; copy_bytes waits for its copy,
// zero_bytes and strided_copy are stream-ordered and do not wait.
#include "core/cuda/cuda_api.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/cuda/cuda_allocator.h"
#include "core/cuda/device_kernels.h"
#include "core/cuda/stream.h"
#include "core/error.h"
#include "core/log.h"

namespace vela::cuda {

namespace {

// cudaGetDeviceCount once; any error (no driver, no device, driver too old) means zero devices.
int probe_device_count() {
  static int count = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      cudaGetLastError();  // do not leave the error for the next caller to find
      return 0;
    }
    return n;
  }();
  return count;
}

void check_device(int device) {
  // No usable GPU at all is the same outcome as a CPU-only build: Unsupported.
  VELA_CHECK_T(Unsupported, probe_device_count() > 0, "no usable CUDA device on this machine (",
               "requested cuda:", device, ")");
  VELA_CHECK(device >= 0 && device < probe_device_count(), "CUDA device ", device,
             " does not exist (", probe_device_count(), " devices)");
}

}  // namespace

bool available() { return probe_device_count() > 0; }

int sm_count(int device) {
  static std::array<std::atomic<int>, 64> known{};  // 0: not asked yet
  if (device < 0 || device >= static_cast<int>(known.size()))
    return device_properties(device).multiProcessorCount;
  std::atomic<int>& k = known[static_cast<size_t>(device)];
  int n = k.load(std::memory_order_relaxed);
  if (n == 0) {
    n = device_properties(device).multiProcessorCount;
    k.store(n, std::memory_order_relaxed);
  }
  return n;
}

int device_count() { return probe_device_count(); }

void init_device(int device) {
  check_device(device);
  DeviceGuard guard(device);  // the calling thread's current device is left as it was
  VELA_CUDA_CHECK(cudaFree(nullptr));
}

std::string device_description(int device) {
  check_device(device);
  const cudaDeviceProp& prop = device_properties(device);
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%s, %.1f GiB, %d SMs, sm_%d%d", prop.name,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                prop.multiProcessorCount, prop.major, prop.minor);
  return buf;
}

AllocatorStats allocator_stats(int device) { return CachingAllocator::instance().stats(device); }

void reset_peak_stats(int device) { CachingAllocator::instance().reset_peak(device); }

void empty_cache(int device) { CachingAllocator::instance().empty_cache(device); }

size_t device_free_bytes(int device) {
  check_device(device);
  DeviceGuard guard(device);
  size_t free = 0, total = 0;
  VELA_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const AllocatorStats st = allocator_stats(device);
  return free + (st.bytes_reserved - st.bytes_in_use);
}

void* device_alloc(size_t bytes, int device) {
  check_device(device);
  return CachingAllocator::instance().allocate(bytes, device);
}

void device_free(void* p) { CachingAllocator::instance().free(p); }

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  copy_bytes_async(dst, dst_device, src, src_device, bytes);
  if (bytes == 0 || (dst_device.is_cpu() && src_device.is_cpu())) return;
  DeviceGuard guard(dst_device.is_cuda() ? dst_device.index : src_device.index);
  VELA_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
}

void zero_bytes(void* p, size_t bytes, int device) {
  if (bytes == 0) return;
  check_device(device);
  DeviceGuard guard(device);
  VELA_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, current_stream()));
}

void strided_copy(void* dst, const void* src, size_t elem_bytes, int rank, const int64_t* shape,
                  const int64_t* src_strides, int device) {
  check_device(device);
  DeviceGuard guard(device);
  launch_strided_gather(dst, src, elem_bytes, rank, shape, src_strides);
}

void* host_alloc_pinned(size_t bytes) {
  void* p = nullptr;
  VELA_CUDA_CHECK(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault));
  return p;
}

void host_free_pinned(void* p) {
  if (p != nullptr) cudaFreeHost(p);
}

void copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  check_device(device);
  DeviceGuard guard(device);
  // Unified addressing: cudaMemcpyDefault infers the direction (and peer copies between devices).
  VELA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, current_stream()));
}

StreamEvent::StreamEvent(int device, bool timing) : device_(device) {
  check_device(device);
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  VELA_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  event_ = e;
}

bool current_stream_capturing(int device) {
  DeviceGuard guard(device);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(current_stream(), &status) != cudaSuccess) {
    (void)cudaGetLastError();  // the legacy stream while another captures globally: not this one
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

StreamEvent::~StreamEvent() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void StreamEvent::record() {
  DeviceGuard guard(device_);
  VELA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), current_stream()));
  recorded_ = true;
}

void StreamEvent::synchronize() const {
  if (recorded_) VELA_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}

void StreamEvent::make_current_stream_wait() const {
  if (!recorded_) return;
  DeviceGuard guard(device_);
  // In a capture, a wait on an event recorded outside it is an external wait node: each replay
  // waits for the event's latest record.
  const unsigned flags =
      current_stream_capturing(device_) ? cudaEventWaitExternal : cudaEventWaitDefault;
  VELA_CUDA_CHECK(cudaStreamWaitEvent(current_stream(), static_cast<cudaEvent_t>(event_), flags));
}

double StreamEvent::elapsed_ms(const StreamEvent& start, const StreamEvent& end) {
  float ms = 0.0f;
  VELA_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_),
                                       static_cast<cudaEvent_t>(end.event_)));
  return ms;
}

SideStream::SideStream(int device) : device_(device) {
  check_device(device);
  DeviceGuard guard(device);
  cudaStream_t st = nullptr;
  VELA_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  stream_ = st;
  cudaEvent_t e = nullptr;
  VELA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  event_ = e;
}

SideStream::~SideStream() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void SideStream::enter() {
  DeviceGuard guard(device_);
  prev_ = current_stream();
  set_current_stream(static_cast<cudaStream_t>(stream_));
}

void SideStream::leave() {
  DeviceGuard guard(device_);
  set_current_stream(static_cast<cudaStream_t>(prev_));
}

SideStream::Scope::~Scope() {
  try {
    s_.leave();
  } catch (const std::exception& e) {  // a destructor must not throw; the thread's stream is wrong
    VELA_LOG_ERROR("SideStream: restoring the thread's stream failed: ", e.what());
  }
}

void SideStream::join() {
  DeviceGuard guard(device_);
  VELA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream_)));
  VELA_CUDA_CHECK(cudaStreamWaitEvent(current_stream(), static_cast<cudaEvent_t>(event_), 0));
}

void synchronize(int device) {
  if (!available()) return;
  check_device(device);
  DeviceGuard guard(device);
  VELA_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
}

}  // namespace vela::cuda
