// Host-side CUDA services that code outside .cu files may call without CUDA headers: device
// discovery, the caching allocator, copies. In a CPU-only build available() is false and the
// rest throw Unsupported. Stream access for kernels lives in core/cuda/stream.h (CUDA headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/device.h"

namespace vela::cuda {

// True when built with CUDA and at least one device is usable.
bool available();
// Streaming multiprocessors of `device` (1 in a CPU-only build). Lock-free once known (kernels
// that size their grids by it ask on every launch).
int sm_count(int device = 0);
int device_count();
// Creates `device`'s CUDA context now (cudaSetDevice + cudaFree(0)): ~0.1-0.3 s that a loader
// can overlap with other start-up work instead of paying it at its first allocation.
void init_device(int device);
// Name, memory and SM count of a device, one line (for `vela info`).
std::string device_description(int device);

// Counters of the caching allocator for one device. `n_device_mallocs` counts cudaMalloc calls:
// a steady decode loop must leave it unchanged.
struct AllocatorStats {
  size_t bytes_in_use = 0;  // handed out to tensors now
  size_t peak_bytes_in_use = 0;
  size_t bytes_reserved = 0;  // held from the driver (in use + cached)
  int64_t n_device_mallocs = 0;
  int64_t n_device_frees = 0;
  int64_t n_allocs = 0;  // requests served (from cache or driver)
};
AllocatorStats allocator_stats(int device = 0);
void reset_peak_stats(int device = 0);
// Returns cached, unused blocks to the driver.
void empty_cache(int device = 0);
// Bytes a new allocation on `device` could get: the driver's free memory plus what the caching
// allocator holds unused (for sizing the KV pool by a memory fraction).
size_t device_free_bytes(int device = 0);

// Allocation through the caching allocator; throws OutOfMemory with the sizes involved.
void* device_alloc(size_t bytes, int device);
void device_free(void* p);

// Copies bytes between any pair of host / device pointers on the current stream and waits for it.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
void zero_bytes(void* p, size_t bytes, int device);
// Copies a strided tensor region into a contiguous destination on the same device (rank <= 6).
void strided_copy(void* dst, const void* src, size_t elem_bytes, int rank, const int64_t* shape,
                  const int64_t* src_strides, int device);
// Waits for all work on the current stream of `device`.
void synchronize(int device = 0);
// Whether the calling thread's current stream on `device` is capturing a CUDA graph (an event
// recorded then is a capture dependency, not a point the host or another stream can wait for).
bool current_stream_capturing(int device);

// Page-locked host memory, which lets copy_bytes_async overlap the host; freed by host_free_pinned.
void* host_alloc_pinned(size_t bytes);
void host_free_pinned(void* p);
// Like copy_bytes but does not wait: the copy is ordered on the current stream, and the source
// must stay unchanged until the stream has passed it (see StreamEvent).
void copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t bytes);

// A CUDA event on a device's current stream: marks how far the stream has come, for waiting on
// it from the host and for timing the stream between two events. Not copyable.
class StreamEvent {
 public:
  explicit StreamEvent(int device, bool timing = false);
  ~StreamEvent();
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  void record();             // on the current stream of the device
  void synchronize() const;  // waits until the stream passed the last record(); no-op if none
  // Orders the calling thread's current stream after the last record() (cudaStreamWaitEvent: the
  // host does not wait); no-op if never recorded. Orders work across streams, e.g. weights
  // written on a trainer's stream before the engine's stream reads them. In a graph capture it
  // is an external wait: each replay waits for the latest record().
  void make_current_stream_wait() const;
  bool recorded() const { return recorded_; }
  // Milliseconds of stream time from `start` to `end` (both recorded with timing, end reached).
  static double elapsed_ms(const StreamEvent& start, const StreamEvent& end);

 private:
  int device_;
  void* event_ = nullptr;  // cudaEvent_t
  bool recorded_ = false;
};

// A second stream on a device, for copies that overlap the work of the thread's current stream
// (the constrained-decoding masks upload while the forward runs). enter() makes it the calling
// thread's current stream until leave(); join() orders the current stream after everything
// enqueued on it so far (an event: the host does not wait). Not copyable.
class SideStream {
 public:
  explicit SideStream(int device);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
  void enter();
  void leave();
  void join();

  // The side stream is current for the scope (left also when what runs in it throws).
  class Scope {
   public:
    explicit Scope(SideStream& s) : s_(s) { s_.enter(); }
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    SideStream& s_;
  };

 private:
  int device_;
  void* stream_ = nullptr;  // cudaStream_t
  void* event_ = nullptr;   // cudaEvent_t
  void* prev_ = nullptr;    // the thread's current stream before enter()
};

}  // namespace vela::cuda
