// The CUDA caching allocator (PyTorch's design, simplified): device memory is taken from the
// driver in segments and handed out as blocks; freed blocks go back to a per-device cache and are
// reused best-fit, split when much larger than asked, and merged with free neighbours.
//
// Sizes: requests round up to 512 B. Requests <= 1 MiB come from 2 MiB "small" segments; larger
// ones from 20 MiB segments (requests < 10 MiB) or segments rounded up to 2 MiB.
//
// Streams: a block remembers the current stream at allocation and is reused only by allocations
// on that same stream, so stream order makes reuse safe. vela uses one stream per device at a
// time; a tensor allocated on stream A and used on stream B must be synchronized by its user
// before it is freed (there is no record_stream).
//
// Thread-safe (one mutex). Never calls cudaFree except from empty_cache() or when a cudaMalloc
// failed and the cache is released before one retry; then OutOfMemory is thrown.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/cuda/cuda_api.h"

namespace vela::cuda {

class CachingAllocator {
 public:
  static constexpr size_t kMinBlockBytes = 512;
  static constexpr size_t kSmallRequestBytes = size_t{1} << 20;  // <= this: small pool
  static constexpr size_t kSmallSegmentBytes = size_t{2} << 20;
  static constexpr size_t kMidRequestBytes = size_t{10} << 20;  // < this: 20 MiB segments
  static constexpr size_t kLargeSegmentBytes = size_t{20} << 20;
  static constexpr size_t kLargeRoundBytes = size_t{2} << 20;

  // The process-wide instance (never destroyed, so late frees at exit stay valid).
  static CachingAllocator& instance();

  void* allocate(size_t bytes, int device);
  void free(void* p);
  void empty_cache(int device);
  AllocatorStats stats(int device);
  void reset_peak(int device);
  // Rounded size a request of `bytes` occupies (for tests and statistics).
  static size_t round_size(size_t bytes);

 private:
  struct Block {
    int device = 0;
    cudaStream_t stream = nullptr;
    size_t size = 0;  // bytes
    char* ptr = nullptr;
    bool allocated = false;
    bool small = false;     // which pool
    Block* prev = nullptr;  // neighbours inside the same segment
    Block* next = nullptr;
  };
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;
  struct DeviceState {
    Pool small_pool;
    Pool large_pool;
    AllocatorStats stats;
  };

  CachingAllocator() = default;
  DeviceState& state(int device);  // caller holds mu_
  Block* malloc_segment(DeviceState& st, int device, cudaStream_t stream, size_t size, bool small,
                        size_t requested);
  void release_cached(DeviceState& st, int device);  // whole free segments only
  void insert_free(DeviceState& st, Block* b);

  std::mutex mu_;
  std::vector<DeviceState*> devices_;         // indexed by device, created on first use
  std::unordered_map<void*, Block*> active_;  // allocated blocks by pointer
};

}  // namespace vela::cuda
