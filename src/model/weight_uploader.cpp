// WeightUploader (see weight_uploader.h).
#include "model/weight_uploader.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/cuda/cuda_api.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "ops/cast.h"

namespace vela {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

WeightUploader::WeightUploader(Device device, int64_t buffer_bytes, int n_buffers)
    : device_(device), buffer_bytes_(buffer_bytes), n_buffers_(n_buffers) {
  VELA_CHECK(buffer_bytes >= 4096 && n_buffers >= 2,
             "WeightUploader: needs at least 2 staging buffers of >= 4 KiB");
}

WeightUploader::~WeightUploader() {
  try {
    finish();
  } catch (...) {
  }
  for (Buffer& b : buffers_) cuda::host_free_pinned(b.host);
}

void WeightUploader::allocate() {
  const auto t0 = std::chrono::steady_clock::now();
  // Built aside and kept only whole: a failure midway frees what it got (and leaves no buffer
  // without its event for finish() to wait on).
  std::vector<Buffer> ring(static_cast<size_t>(n_buffers_));
  try {
    for (Buffer& b : ring) {
      b.host = cuda::host_alloc_pinned(static_cast<size_t>(buffer_bytes_));
      b.done = std::make_unique<cuda::StreamEvent>(device_.index);
    }
  } catch (...) {
    for (Buffer& b : ring) cuda::host_free_pinned(b.host);
    throw;
  }
  buffers_ = std::move(ring);
  alloc_s_ += seconds_since(t0);
}

void WeightUploader::next_buffer() {
  buffers_[static_cast<size_t>(current_)].done->record();
  current_ = (current_ + 1) % n_buffers_;
  const auto t0 = std::chrono::steady_clock::now();
  buffers_[static_cast<size_t>(current_)].done->synchronize();  // its last copies have left it
  wait_s_ += seconds_since(t0);
  offset_ = 0;
}

void WeightUploader::upload(const Tensor& src, Tensor dst) {
  VELA_CHECK(src.numel() == dst.numel(), "WeightUploader: ", src.numel(), " elements into ",
             dst.numel());
  VELA_CHECK(dst.is_contiguous(), "WeightUploader: the destination must be contiguous");
  if (src.numel() == 0) return;
  Tensor flat_src = src.contiguous().view({src.numel()});
  if (dst.is_cpu()) {
    Tensor flat_dst = dst.view({dst.numel()});
    ops::cast(flat_src, flat_dst);
    return;
  }
  VELA_CHECK(dst.device() == device_, "WeightUploader: destination on ", dst.device().str(),
             ", uploader for ", device_.str());
  if (buffers_.empty()) allocate();
  const int64_t elem = static_cast<int64_t>(dst.element_size());
  const int64_t per_buffer = buffer_bytes_ / elem;
  char* dst_bytes = static_cast<char*>(dst.data_ptr());
  for (int64_t begin = 0; begin < src.numel();) {
    int64_t room = (buffer_bytes_ - offset_) / elem;
    const int64_t left = src.numel() - begin;
    if (room < std::min(left, per_buffer)) {  // a fresh buffer takes it whole (or a full chunk)
      next_buffer();
      room = per_buffer;
    }
    const int64_t n = std::min(left, room);
    char* host = static_cast<char*>(buffers_[static_cast<size_t>(current_)].host) + offset_;
    const auto t0 = std::chrono::steady_clock::now();
    if (src.dtype() == dst.dtype()) {
      // A plain copy out of the page cache: parallel (one thread reaches ~1/4 of the memory
      // bandwidth, and the first touch of each mapped page faults).
      const char* from = static_cast<const char*>(flat_src.data_ptr()) + begin * elem;
      const int64_t n_bytes = n * elem, block = int64_t{1} << 20;
      parallel_for((n_bytes + block - 1) / block, 1, [&](int64_t b0, int64_t b1) {
        const int64_t lo = b0 * block, hi = std::min(n_bytes, b1 * block);
        std::memcpy(host + lo, from + lo, static_cast<size_t>(hi - lo));
      });
    } else {
      Tensor staged = Tensor::from_blob(host, {n}, dst.dtype(), Device::cpu());
      ops::cast(flat_src.slice(0, begin, begin + n), staged);
    }
    host_s_ += seconds_since(t0);
    cuda::copy_bytes_async(dst_bytes + begin * elem, device_, host, Device::cpu(),
                           static_cast<size_t>(n * elem));
    offset_ += (n * elem + 255) / 256 * 256;
    begin += n;
    bytes_uploaded_ += n * elem;
  }
}

void WeightUploader::finish() {
  if (buffers_.empty()) return;
  buffers_[static_cast<size_t>(current_)].done->record();
  const auto t0 = std::chrono::steady_clock::now();
  for (Buffer& b : buffers_) b.done->synchronize();
  wait_s_ += seconds_since(t0);
  offset_ = buffer_bytes_;  // the next upload starts a fresh buffer (after waiting for it)
  if (bytes_logged_ == bytes_uploaded_) return;
  bytes_logged_ = bytes_uploaded_;
  const double gb = static_cast<double>(bytes_uploaded_) / 1e9;
  VELA_LOG_DEBUG("[weights] ", gb, " GB through pinned staging: allocation ", alloc_s_ * 1e3,
                 " ms, host copies ", host_s_ * 1e3, " ms (", host_s_ > 0 ? gb / host_s_ : 0.0,
                 " GB/s), waits for the copy engine ", wait_s_ * 1e3, " ms");
}

}  // namespace vela
