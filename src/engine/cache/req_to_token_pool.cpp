// ReqToTokenPool: row free list, host mirror updates and the device sync of changed entries.
#include "engine/cache/req_to_token_pool.h"

#include <algorithm>

#include "core/cuda/cuda_api.h"
#include "core/env.h"
#include "ops/write_ranges.h"

namespace vela {

ReqToTokenPool::ReqToTokenPool(int32_t max_reqs, int32_t max_ctx, Device device)
    : max_reqs_(max_reqs), max_ctx_(max_ctx), device_(device) {
  VELA_CHECK(max_reqs > 0 && max_ctx > 0,
             "ReqToTokenPool: max_reqs and max_ctx must be positive (got ", max_reqs, ", ", max_ctx,
             ")");
  // Page-locked up to a size where pinning stops being cheap (the copies stay correct from
  // ordinary memory; the driver stages them).
  constexpr int64_t kMaxPinnedBytes = int64_t{256} << 20;
  const bool pin = device.is_cuda() && int64_t{max_reqs} * max_ctx * 4 <= kMaxPinnedBytes;
  host_ = pin ? Tensor::zeros_pinned({max_reqs, max_ctx}, DType::kI32)
              : Tensor::empty({max_reqs, max_ctx}, DType::kI32);
  std::fill_n(host_.data<int32_t>(), host_.numel(), kNoSlot);
  if (device.is_cpu()) {
    table_ = host_;
  } else {
    table_ = host_.to(device);
    const int64_t patch_len = int64_t{max_reqs} * (4 + kPatchRun);
    patch_host_ = Tensor::zeros_pinned({patch_len}, DType::kI32);
    patch_ = Tensor::empty({patch_len}, DType::kI32, device);
    copied_ = std::make_unique<cuda::StreamEvent>(device.index);
    dirty_cols_.assign(static_cast<size_t>(max_reqs), {0, 0});
    dirty_rows_.reserve(static_cast<size_t>(max_reqs));
  }
  free_rows_.reserve(static_cast<size_t>(max_reqs));
  for (int32_t r = max_reqs - 1; r >= 0; --r) free_rows_.push_back(r);
  in_use_.assign(static_cast<size_t>(max_reqs), 0);
  row_end_.assign(static_cast<size_t>(max_reqs), 0);
}

ReqToTokenPool::~ReqToTokenPool() {
  // The host mirror may still be the source of a copy in flight. A device that already failed
  // has nothing left to wait for (and a destructor must not throw).
  if (!copies_pending_) return;
  try {
    copied_->synchronize();
  } catch (const std::exception&) {
  }
}

std::optional<int32_t> ReqToTokenPool::alloc() {
  if (free_rows_.empty()) return std::nullopt;
  int32_t r = free_rows_.back();
  free_rows_.pop_back();
  in_use_[static_cast<size_t>(r)] = 1;
  return r;
}

void ReqToTokenPool::free(int32_t r) {
  VELA_ASSERT(in_use(r), "ReqToTokenPool::free: row ", r, " is not in use");
  clear(r, 0, row_end_[static_cast<size_t>(r)]);  // past it every entry is kNoSlot already
  row_end_[static_cast<size_t>(r)] = 0;
  in_use_[static_cast<size_t>(r)] = 0;
  free_rows_.push_back(r);
}

bool ReqToTokenPool::in_use(int32_t r) const {
  return r >= 0 && r < max_reqs_ && in_use_[static_cast<size_t>(r)] != 0;
}

int32_t* ReqToTokenPool::mutable_row(int32_t r) {
  if (copies_pending_) {  // the last sync's copies read the mirror: let them finish first
    copied_->synchronize();
    copies_pending_ = false;
  }
  return host_.data<int32_t>() + static_cast<int64_t>(r) * max_ctx_;
}

const int32_t* ReqToTokenPool::row(int32_t r) const {
  VELA_ASSERT(r >= 0 && r < max_reqs_, "ReqToTokenPool::row: row ", r, " out of range");
  return host_.data<int32_t>() + static_cast<int64_t>(r) * max_ctx_;
}

void ReqToTokenPool::mark_dirty(int32_t r, int32_t lo, int32_t hi) {
  if (device_.is_cpu()) return;
  auto& [dlo, dhi] = dirty_cols_[static_cast<size_t>(r)];
  if (dlo == dhi) {
    dirty_rows_.push_back(r);
    dlo = lo;
    dhi = hi;
  } else {
    dlo = std::min(dlo, lo);
    dhi = std::max(dhi, hi);
  }
}

void ReqToTokenPool::set(int32_t r, int32_t pos, const int32_t* slots, int32_t n) {
  VELA_ASSERT(in_use(r), "ReqToTokenPool::set: row ", r, " is not in use");
  VELA_ASSERT(pos >= 0 && n >= 0 && pos + n <= max_ctx_, "ReqToTokenPool::set: positions [", pos,
              ", ", pos + n, ") outside the context of ", max_ctx_);
  if (n == 0) return;
  std::copy_n(slots, n, mutable_row(r) + pos);
  row_end_[static_cast<size_t>(r)] = std::max(row_end_[static_cast<size_t>(r)], pos + n);
  mark_dirty(r, pos, pos + n);
}

void ReqToTokenPool::clear(int32_t r, int32_t pos, int32_t n) {
  VELA_ASSERT(r >= 0 && r < max_reqs_ && pos >= 0 && n >= 0 && pos + n <= max_ctx_,
              "ReqToTokenPool::clear: bad range");
  if (n == 0) return;
  std::fill_n(mutable_row(r) + pos, n, kNoSlot);
  mark_dirty(r, pos, pos + n);
}

void ReqToTokenPool::sync() {
  last_sync_entries_ = 0;
  if (device_.is_cpu() || dirty_rows_.empty()) return;
  const auto* src = host_.data<int32_t>();
  auto* dst = table_.data<int32_t>();
  int32_t n_short = 0;
  for (int32_t r : dirty_rows_) {
    const auto& [lo, hi] = dirty_cols_[static_cast<size_t>(r)];
    n_short += hi - lo <= kPatchRun;
  }
  static const bool patch_on = env_enabled("VELA_TABLE_PATCH");  // 0: per-row copies (A/B runs)
  const bool patch = patch_on && n_short >= kPatchMinRows;
  // The staging buffer is free: a changed row means set() / clear() ran since the last sync, and
  // they waited for its copies (mutable_row).
  VELA_ASSERT(!copies_pending_, "ReqToTokenPool::sync: the last sync's copies were not awaited");
  int32_t* ranges = patch ? patch_host_.data<int32_t>() : nullptr;
  int32_t* values = patch ? ranges + 4 * n_short : nullptr;
  int32_t n_ranges = 0, n_values = 0;
  for (int32_t r : dirty_rows_) {
    auto& [lo, hi] = dirty_cols_[static_cast<size_t>(r)];
    const int64_t off = static_cast<int64_t>(r) * max_ctx_ + lo;
    const int32_t n = hi - lo;
    if (patch && n <= kPatchRun) {
      int32_t* range = ranges + 4 * n_ranges++;
      range[0] = r;
      range[1] = lo;
      range[2] = n;
      range[3] = n_values;
      std::copy_n(src + off, n, values + n_values);
      n_values += n;
    } else {  // one asynchronous copy of the row's changed entries
      cuda::copy_bytes_async(dst + off, device_, src + off, Device::cpu(),
                             static_cast<size_t>(n) * sizeof(int32_t));
    }
    last_sync_entries_ += n;
    lo = hi = 0;
  }
  dirty_rows_.clear();
  if (patch) {
    const int64_t len = 4 * int64_t{n_short} + n_values;
    cuda::copy_bytes_async(patch_.data<int32_t>(), device_, ranges, Device::cpu(),
                           static_cast<size_t>(len) * sizeof(int32_t));
    ops::write_ranges(patch_.slice(0, 0, 4 * int64_t{n_short}).view({n_short, 4}),
                      patch_.slice(0, 4 * int64_t{n_short}, len), table_);
  }
  copied_->record();
  copies_pending_ = true;
}

void ReqToTokenPool::check_integrity() const {
  std::vector<uint8_t> seen(static_cast<size_t>(max_reqs_), 0);
  for (int32_t r : free_rows_) {
    VELA_ASSERT(r >= 0 && r < max_reqs_, "free row ", r, " out of range");
    VELA_ASSERT(!seen[static_cast<size_t>(r)], "row ", r, " is twice on the free list");
    seen[static_cast<size_t>(r)] = 1;
    VELA_ASSERT(!in_use_[static_cast<size_t>(r)], "row ", r, " is both free and in use");
    const int32_t* p = row(r);
    for (int32_t i = 0; i < max_ctx_; ++i)
      VELA_ASSERT(p[i] == kNoSlot, "free row ", r, " still maps position ", i, " to slot ", p[i]);
  }
  for (int32_t r = 0; r < max_reqs_; ++r)
    VELA_ASSERT(seen[static_cast<size_t>(r)] || in_use_[static_cast<size_t>(r)], "row ", r,
                " is neither free nor in use");
}

}  // namespace vela
