// ReqToTokenPool: the request table, int32 [max_reqs, max_ctx] mapping (request row, position) to a
// KV slot, and the free list of its rows. The host mirror is the source of truth; on CUDA a device
// copy is refreshed by sync() (TaskCacheManager::bind calls it), on the CPU both are the same
// memory. Entries a row does not own hold kNoSlot: a freed row is wiped, so a recycled row can
// never expose the slots of the request that held it before. Not thread-safe.
//
// sync() copies only the changed entries, row by row, asynchronously on the current stream from
// page-locked memory: a decode step changes a few rows by a page's worth of entries, while one
// copy of the whole changed row range moved megabytes per serving step (rows are max_ctx long)
// and waited for it. A host write after a sync waits for the copies first.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace vela {

namespace cuda {
class StreamEvent;
}

class ReqToTokenPool {
 public:
  static constexpr int32_t kNoSlot = -1;

  ReqToTokenPool(int32_t max_reqs, int32_t max_ctx, Device device);
  ~ReqToTokenPool();
  ReqToTokenPool(const ReqToTokenPool&) = delete;
  ReqToTokenPool& operator=(const ReqToTokenPool&) = delete;

  int32_t max_reqs() const { return max_reqs_; }
  int32_t max_ctx() const { return max_ctx_; }
  Device device() const { return device_; }

  // A free row (every entry kNoSlot), or nullopt when all rows are in use. Freed rows are reused
  // first (LIFO), lowest row first at start.
  std::optional<int32_t> alloc();
  // Returns `row` to the free list and wipes it to kNoSlot.
  void free(int32_t row);
  int32_t n_free() const { return static_cast<int32_t>(free_rows_.size()); }
  bool in_use(int32_t row) const;

  // Host mirror: row[pos + i] = slots[i] for i < n.
  void set(int32_t row, int32_t pos, const int32_t* slots, int32_t n);
  // Sets entries [pos, pos + n) of `row` back to kNoSlot.
  void clear(int32_t row, int32_t pos, int32_t n);
  const int32_t* row(int32_t r) const;  // host mirror, max_ctx entries

  // The table the attention kernels read: [max_reqs, max_ctx] i32 on device().
  Tensor table() const { return table_; }
  // Copies the entries changed since the last sync to the device table, ordered on the current
  // stream (no-op on the CPU).
  void sync();
  // Entries the last sync() copied (tests, stats).
  int64_t last_sync_entries() const { return last_sync_entries_; }

  // Free rows unique and wiped; in-use flags match the free list. Throws InternalError.
  void check_integrity() const;

 private:
  int32_t max_reqs_, max_ctx_;
  Device device_;
  Tensor host_;   // [max_reqs, max_ctx] i32 on the CPU (the mirror; page-locked on CUDA <= 256 MB)
  Tensor table_;  // [max_reqs, max_ctx] i32 on device_ (same storage as host_ on the CPU)
  std::vector<int32_t> free_rows_;  // stack: back() is handed out next
  std::vector<uint8_t> in_use_;     // [max_reqs]
  std::vector<int32_t> row_end_;    // [max_reqs]: entries past it are kNoSlot (writes so far)
  // CUDA only: rows changed since the last sync, and per row the changed entries [lo, hi).
  std::vector<int32_t> dirty_rows_;
  std::vector<std::pair<int32_t, int32_t>> dirty_cols_;  // [max_reqs], lo == hi: clean
  std::unique_ptr<cuda::StreamEvent> copied_;            // after the last sync's copies
  bool copies_pending_ = false;
  int64_t last_sync_entries_ = 0;

  int32_t* mutable_row(int32_t r);  // waits for pending copies first
  void mark_dirty(int32_t r, int32_t lo, int32_t hi);
};

}  // namespace vela
