// ReqToTokenPool: the request table, int32 [max_reqs, max_ctx] mapping (request row, position) to a
// KV slot, and the free list of its rows. The host mirror is the source of truth; on CUDA a device
// copy is refreshed by sync() (TaskCacheManager::bind calls it), on the CPU both are the same
// memory. Entries a row does not own hold kNoSlot: a freed row is wiped, so a recycled row can
// never expose the slots of the request that held it before. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace vela {

class ReqToTokenPool {
 public:
  static constexpr int32_t kNoSlot = -1;

  ReqToTokenPool(int32_t max_reqs, int32_t max_ctx, Device device);

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
  // Copies host rows changed since the last sync to the device table (no-op on the CPU).
  void sync();

  // Free rows unique and wiped; in-use flags match the free list. Throws InternalError.
  void check_integrity() const;

 private:
  int32_t max_reqs_, max_ctx_;
  Device device_;
  Tensor host_;   // [max_reqs, max_ctx] i32 on the CPU (the mirror)
  Tensor table_;  // [max_reqs, max_ctx] i32 on device_ (same storage as host_ on the CPU)
  std::vector<int32_t> free_rows_;  // stack: back() is handed out next
  std::vector<uint8_t> in_use_;     // [max_reqs]
  int32_t dirty_lo_, dirty_hi_;     // rows [lo, hi) changed since the last sync (CUDA only)

  int32_t* mutable_row(int32_t r);
  void mark_dirty(int32_t r);
};

}  // namespace vela
