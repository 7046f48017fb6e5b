// CPU aligned allocation, zero-filled mappings for large zeroed blocks, and Storage construction.
#include "core/allocator.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
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

std::shared_ptr<Storage> Storage::allocate_zeroed(size_t bytes, Device device) {
  if (!device.is_cpu() || bytes < kLazyZeroBytes) {
    std::shared_ptr<Storage> s = allocate(bytes, device);
    if (bytes == 0) return s;
    if (device.is_cpu())
      std::memset(s->data, 0, bytes);
    else
      cuda::zero_bytes(s->data, bytes, device.index);
    return s;
  }
  g_storage_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  VELA_CHECK_T(OutOfMemory, p != MAP_FAILED, "host allocation of ", bytes,
               " bytes failed: ", std::strerror(errno));
  auto s = std::make_shared<Storage>();
  s->data = p;
  s->bytes = bytes;
  s->device = device;
  s->deleter = [bytes](void* q) { munmap(q, bytes); };
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
