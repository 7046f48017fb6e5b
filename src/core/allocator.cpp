// CPU aligned allocation and Storage construction.
#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/cuda/cuda_api.h"
#include "core/error.h"

namespace vela {

void* cpu_alloc(size_t bytes) {
  size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  if (rounded == 0) rounded = kCpuAlignment;
  void* p = std::aligned_alloc(kCpuAlignment, rounded);
  VELA_CHECK_T(OutOfMemory, p != nullptr, "host allocation of ", bytes, " bytes failed");
  return p;
}

void cpu_free(void* p) { std::free(p); }

namespace {
std::atomic<uint64_t> g_storage_allocations{0};
}  // namespace

uint64_t storage_allocation_count() { return g_storage_allocations.load(std::memory_order_relaxed); }

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  g_storage_allocations.fetch_add(1, std::memory_order_relaxed);
  auto s = std::make_shared<Storage>();
  s->bytes = bytes;
  s->device = device;
  if (device.is_cpu()) {
    s->data = cpu_alloc(bytes);
    s->deleter = cpu_free;
  } else {
    s->data = cuda::device_alloc(bytes, device.index);
    s->deleter = cuda::device_free;
  }
  return s;
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t bytes, Device device,
                                         std::shared_ptr<void> keepalive) {
  auto s = std::make_shared<Storage>();
  s->data = data;
  s->bytes = bytes;
  s->device = device;
  s->keepalive = std::move(keepalive);
  return s;
}

}  // namespace vela
