// The CUDA caching allocator: segments from cudaMalloc, best-fit reuse, splitting and merging.
// See cuda_allocator.h for the policy and the single-stream assumption.
#include "core/cuda/cuda_allocator.h"

#include <cstdio>

#include "core/cuda/stream.h"
#include "core/error.h"

namespace vela::cuda {

namespace {

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

std::string mib(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream)
    return reinterpret_cast<uintptr_t>(a->stream) < reinterpret_cast<uintptr_t>(b->stream);
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

CachingAllocator& CachingAllocator::instance() {
  static CachingAllocator* allocator = new CachingAllocator();  // leaked on purpose
  return *allocator;
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes < kMinBlockBytes) return kMinBlockBytes;
  return round_up(bytes, kMinBlockBytes);
}

CachingAllocator::DeviceState& CachingAllocator::state(int device) {
  VELA_CHECK(device >= 0 && device < device_count(), "CUDA device ", device, " does not exist (",
             device_count(), " devices)");
  if (static_cast<size_t>(device) >= devices_.size()) devices_.resize(device + 1, nullptr);
  if (!devices_[device]) devices_[device] = new DeviceState();
  return *devices_[device];
}

void CachingAllocator::insert_free(DeviceState& st, Block* b) {
  (b->small ? st.small_pool : st.large_pool).insert(b);
}

CachingAllocator::Block* CachingAllocator::malloc_segment(DeviceState& st, int device,
                                                          cudaStream_t stream, size_t size,
                                                          bool small, size_t requested) {
  size_t segment_bytes = small                     ? kSmallSegmentBytes
                         : size < kMidRequestBytes ? kLargeSegmentBytes
                                                   : round_up(size, kLargeRoundBytes);
  DeviceGuard guard(device);
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, segment_bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the (non-sticky) error, give the cache back, try once more
    release_cached(st, device);
    err = cudaMalloc(&p, segment_bytes);
  }
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    VELA_THROW(OutOfMemory, "CUDA out of memory on device ", device, ": tried to allocate ",
               mib(requested), " (segment ", mib(segment_bytes), "); ", mib(st.stats.bytes_in_use),
               " in use, ", mib(st.stats.bytes_reserved), " reserved by vela");
  }
  VELA_CUDA_CHECK(err);
  st.stats.n_device_mallocs += 1;
  st.stats.bytes_reserved += segment_bytes;
  Block* b = new Block();
  b->device = device;
  b->stream = stream;
  b->size = segment_bytes;
  b->ptr = static_cast<char*>(p);
  b->small = small;
  return b;
}

void CachingAllocator::release_cached(DeviceState& st, int device) {
  DeviceGuard guard(device);
  for (Pool* pool : {&st.small_pool, &st.large_pool}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev == nullptr && b->next == nullptr) {  // a whole, free segment
        VELA_CUDA_CHECK(cudaFree(b->ptr));
        st.stats.n_device_frees += 1;
        st.stats.bytes_reserved -= b->size;
        it = pool->erase(it);
        delete b;
      } else {
        ++it;
      }
    }
  }
}

void* CachingAllocator::allocate(size_t bytes, int device) {
  cudaStream_t stream;
  {
    DeviceGuard guard(device);
    stream = current_stream();
  }
  size_t size = round_size(bytes);
  bool small = size <= kSmallRequestBytes;
  std::lock_guard<std::mutex> lock(mu_);
  DeviceState& st = state(device);
  Pool& pool = small ? st.small_pool : st.large_pool;

  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;
  Block* b = nullptr;
  auto it = pool.lower_bound(&key);
  if (it != pool.end() && (*it)->stream == stream) {
    b = *it;
    pool.erase(it);
  } else {
    b = malloc_segment(st, device, stream, size, small, bytes);
  }

  // Split off the tail when it is worth keeping as its own free block.
  size_t remaining = b->size - size;
  if ((small && remaining >= kMinBlockBytes) || (!small && remaining > kSmallRequestBytes)) {
    Block* tail = new Block();
    tail->device = device;
    tail->stream = stream;
    tail->size = remaining;
    tail->ptr = b->ptr + size;
    tail->small = small;
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    insert_free(st, tail);
  }

  b->allocated = true;
  active_.emplace(b->ptr, b);
  st.stats.n_allocs += 1;
  st.stats.bytes_in_use += b->size;
  if (st.stats.bytes_in_use > st.stats.peak_bytes_in_use)
    st.stats.peak_bytes_in_use = st.stats.bytes_in_use;
  return b->ptr;
}

void CachingAllocator::free(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(p);
  VELA_ASSERT(it != active_.end(), "device_free of a pointer the CUDA allocator did not hand out");
  Block* b = it->second;
  active_.erase(it);
  DeviceState& st = *devices_[b->device];
  Pool& pool = b->small ? st.small_pool : st.large_pool;
  st.stats.bytes_in_use -= b->size;
  b->allocated = false;

  // Merge with free neighbours of the same segment.
  if (b->prev && !b->prev->allocated) {
    Block* prev = b->prev;
    pool.erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next) b->next->prev = prev;
    delete b;
    b = prev;
  }
  if (b->next && !b->next->allocated) {
    Block* next = b->next;
    pool.erase(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next) next->next->prev = b;
    delete next;
  }
  pool.insert(b);
}

void CachingAllocator::empty_cache(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached(state(device), device);
}

AllocatorStats CachingAllocator::stats(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  return state(device).stats;
}

void CachingAllocator::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceState& st = state(device);
  st.stats.peak_bytes_in_use = st.stats.bytes_in_use;
}

}  // namespace vela::cuda
