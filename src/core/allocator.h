// Allocators. CPU memory is 64-byte aligned (one cache line, one AVX-512 vector). CUDA memory goes
// through the caching allocator in core/cuda/cuda_allocator.h. Storage owns one allocation (or a
// borrowed region such as an mmap'd file, kept alive by `keepalive`) and is shared by tensor views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"

namespace vela {

constexpr size_t kCpuAlignment = 64;
constexpr size_t kLazyZeroBytes = size_t{1} << 20;  // Storage::allocate_zeroed maps from here up

// Aligned host allocation; throws OutOfMemory. Zero bytes returns a valid unique pointer.
void* cpu_alloc(size_t bytes);
void cpu_free(void* p);

struct Storage {
  void* data = nullptr;
  size_t bytes = 0;
  Device device;
  std::function<void(void*)> deleter;   // empty for borrowed memory
  std::shared_ptr<void> keepalive;      // e.g. the mapped file a borrowed region lives in

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (deleter && data) deleter(data);
  }

  // Allocates `bytes` on `device` (CPU aligned allocator or the CUDA caching allocator).
  // Every call bumps allocation_count() (tests check that decode steps allocate nothing).
  static std::shared_ptr<Storage> allocate(size_t bytes, Device device);
  // allocate() with every byte zero. Large host blocks (>= kLazyZeroBytes) are fresh anonymous
  // mappings, which the kernel zero-fills page by page on first touch: a KV pool of hundreds of
  // megabytes costs no start-up memset and no resident memory until its pages are used.
  static std::shared_ptr<Storage> allocate_zeroed(size_t bytes, Device device);
  // Wraps memory owned elsewhere; `keepalive` is held until the storage dies.
  static std::shared_ptr<Storage> borrow(void* data, size_t bytes, Device device,
                                         std::shared_ptr<void> keepalive);
};

// Number of Storage::allocate calls so far in this process (all devices).
uint64_t storage_allocation_count();

}  // namespace vela
