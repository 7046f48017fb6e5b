// ReqToTokenPool: the request table, int32 [max_reqs, max_ctx] mapping (request row, position) to a
// KV slot, and the free list of its rows. The host mirror is the source of truth; on CUDA a device
// copy is refreshed by sync() (TaskCacheManager::bind calls it), on the CPU both are the same
// memory. Entries a row does not own hold kNoSlot: a freed row is wiped, so a recycled row can
// never expose the slots of the request that held it before. Not thread-safe.
//
// sync() copies only the changed entries, asynchronously on the current stream from page-locked
// memory: a decode step changes rows by a page's worth of entries, while one copy of the whole
// changed row range moved megabytes per serving step (rows are max_ctx long) and waited for it.
// A lone row or two, and long runs (a prompt's slots), are copied row by row; short runs of three
// or more rows (a batch crossing a page boundary together: 64 copies every 16th step at batch 64)
// go up as one patch, ranges then values, which ops::write_ranges writes into the table
// (VELA_TABLE_PATCH=0 copies row by row). A host write after a sync waits for the copies first.
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
  // sync(): a changed run of at most kPatchRun entries is patch material, and the patch is used
  // when at least kPatchMinRows rows have such runs.
  static constexpr int32_t kPatchRun = 256;
  static constexpr int32_t kPatchMinRows = 3;

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
  // CUDA only: the patch, [4 * max_reqs] ranges then up to [max_reqs * kPatchRun] values; the
  // ranges of n rows take the first 4n entries and the values follow them.
  Tensor patch_host_;  // page-locked staging
  Tensor patch_;       // on device_
  bool copies_pending_ = false;
  int64_t last_sync_entries_ = 0;

  int32_t* mutable_row(int32_t r);  // waits for pending copies first
  void mark_dirty(int32_t r, int32_t lo, int32_t hi);
};

}  // namespace vela
