// Device parsing, and the CPU-only stand-ins for the CUDA services (real ones: core/cuda/).
#include "core/device.h"

#include "core/cuda/cuda_api.h"
#include "core/error.h"

namespace vela {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    std::string idx = s.substr(5);
    VELA_CHECK(!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos,
               "bad device '", s, "' (expected cpu, cuda or cuda:N)");
    return cuda(std::stoi(idx));
  }
  VELA_THROW(InvalidArgument, "bad device '", s, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace vela

#ifndef VELA_HAS_CUDA
namespace vela::cuda {
namespace {
[[noreturn]] void no_cuda() {
  VELA_THROW(Unsupported, "this vela build has no CUDA backend (configure with a CUDA toolkit)");
}
}  // namespace
bool available() { return false; }
int sm_count(int) { return 1; }
int device_count() { return 0; }
void init_device(int) { no_cuda(); }
std::string device_description(int) { no_cuda(); }
AllocatorStats allocator_stats(int) { return {}; }
void reset_peak_stats(int) {}
void empty_cache(int) {}
size_t device_free_bytes(int) { no_cuda(); }
void* device_alloc(size_t, int) { no_cuda(); }
void device_free(void*) {}
void copy_bytes(void*, Device, const void*, Device, size_t) { no_cuda(); }
void zero_bytes(void*, size_t, int) { no_cuda(); }
void* host_alloc_pinned(size_t) { no_cuda(); }
void host_free_pinned(void*) {}
void copy_bytes_async(void*, Device, const void*, Device, size_t) { no_cuda(); }
StreamEvent::StreamEvent(int device, bool) : device_(device) { no_cuda(); }
StreamEvent::~StreamEvent() = default;
void StreamEvent::record() { no_cuda(); }
void StreamEvent::synchronize() const {}
void StreamEvent::make_current_stream_wait() const {}
double StreamEvent::elapsed_ms(const StreamEvent&, const StreamEvent&) { no_cuda(); }
SideStream::SideStream(int device) : device_(device) { no_cuda(); }
SideStream::~SideStream() = default;
void SideStream::enter() { no_cuda(); }
void SideStream::leave() { no_cuda(); }
void SideStream::join() { no_cuda(); }
bool current_stream_capturing(int) { return false; }
SideStream::Scope::~Scope() = default;
void strided_copy(void*, const void*, size_t, int, const int64_t*, const int64_t*, int) {
  no_cuda();
}
void synchronize(int) {}
}  // namespace vela::cuda
#endif
