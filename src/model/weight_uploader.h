// WeightUploader: streams checkpoint tensors (memory-mapped, any floating dtype) into device
// tensors through a ring of page-locked staging buffers. The host converts the next chunk into a
// free buffer (ops::cast, multi-threaded: this is also the copy out of the page cache) while the
// copy engine moves the previous ones to the device, so loading runs at the slower of the two
// instead of their sum, and no pageable bounce buffer is allocated per tensor. Small tensors
// share a buffer. upload() returns before its copy ends: the source must stay mapped until
// finish() (the destructor also waits). For a CPU destination it is a plain cast.
// Not thread-safe; one per load.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace vela {

namespace cuda {
class StreamEvent;
}

class WeightUploader {
 public:
  // `n_buffers` page-locked buffers of `buffer_bytes` each (allocated on the first device upload).
  // The ring's size barely matters on the H200 machine: with 3 x 64 MiB a 3.4 GB load spent
  // 64-91 ms pinning, 127-167 ms in host copies and < 1 ms waiting for the copy engine; with
  // 4 x 16 MiB 26-27 ms pinning but 211-271 ms in host copies (shorter parallel copies).
  explicit WeightUploader(Device device, int64_t buffer_bytes = int64_t{64} << 20,
                          int n_buffers = 3);
  ~WeightUploader();
  WeightUploader(const WeightUploader&) = delete;
  WeightUploader& operator=(const WeightUploader&) = delete;

  // dst (contiguous, on the uploader's device) = src converted to dst's dtype; same numel.
  void upload(const Tensor& src, Tensor dst);
  // Waits until every copy has reached the device.
  void finish();
  int64_t bytes_uploaded() const { return bytes_uploaded_; }

 private:
  struct Buffer {
    void* host = nullptr;
    std::unique_ptr<cuda::StreamEvent> done;  // recorded after the buffer's last copy
  };
  Device device_;
  int64_t buffer_bytes_;
  int n_buffers_;
  std::vector<Buffer> buffers_;
  int current_ = 0;
  int64_t offset_ = 0;  // bytes used in the current buffer
  int64_t bytes_uploaded_ = 0;
  // Where the load's time goes (logged by finish() at debug): the pinned allocation, the host's
  // copies / conversions into staging, and its waits for the copy engine to free a buffer.
  double alloc_s_ = 0, host_s_ = 0, wait_s_ = 0;
  int64_t bytes_logged_ = 0;  // finish() logs once per batch of uploads

  void allocate();
  // Moves to the next buffer (waiting until its previous copies are done).
  void next_buffer();
};

}  // namespace vela
