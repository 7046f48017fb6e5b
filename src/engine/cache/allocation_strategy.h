// AllocationStrategy: how a task's token positions map to KV slots. TaskCacheManager owns one and
// keeps the generic bookkeeping (rows, lengths, the request table); the strategy owns the slots:
//   ContiguousStrategy  request row r owns slots [r * max_ctx, (r + 1) * max_ctx); no prefix reuse
//   PagedStrategy       pages of page_size slots from a PagePool, prefix reuse through a RadixCache
// Capacity outcomes are return values; misuse is VELA_ASSERT. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/cache/task_cache_state.h"

namespace vela {

struct StrategyUsage {
  int32_t page_size = 0;  // slots per page (contiguous: max_ctx, one page per row)
  int64_t pages_total = 0;
  int64_t pages_free = 0;
  int64_t pages_cached = 0;     // held by the prefix cache
  int64_t pages_evictable = 0;  // cached pages no task uses (could be freed on demand)
};

class AllocationStrategy {
 public:
  virtual ~AllocationStrategy() = default;
  virtual std::string name() const = 0;

  // Called once by TaskCacheManager with the sizes it manages; throws InvalidArgument when the
  // storage cannot back them.
  virtual void attach(int64_t n_slots, int32_t max_reqs, int32_t max_ctx) = 0;

  // Looks up the longest reusable prefix of tokens[0, n_max) and takes it for the task: fills
  // st.pages / cached_len / page_hashes / prefix_node. Contiguous: no reuse.
  virtual void acquire_prefix(TaskCacheState& st, const std::vector<int32_t>& tokens,
                              int32_t n_max) = 0;
  // Tokens a new task with this prompt would reuse (no side effects).
  virtual int32_t peek_prefix(const std::vector<int32_t>& tokens, int32_t n_max) const = 0;
  // Backs positions [0, n_tokens) with slots; false (nothing changed) when out of capacity.
  virtual bool reserve(TaskCacheState& st, int32_t n_tokens) = 0;
  // Positions [0, capacity) of the task have slots; slot(st, pos) is the slot of one of them.
  virtual int32_t capacity(const TaskCacheState& st) const = 0;
  virtual int32_t slot(const TaskCacheState& st, int32_t pos) const = 0;
  // Gives `dst` (a fresh task) the KV of `src`'s positions [0, src.kv_len): shares what can be
  // shared, copies the rest with `copy_slots(dst_first_slot, src_first_slot, n_slots)`. False when
  // out of capacity (nothing changed).
  virtual bool fork(const TaskCacheState& src, TaskCacheState& dst,
                    const std::function<void(int32_t, int32_t, int32_t)>& copy_slots) = 0;
  // Validates that tokens[0, n_record) may be recorded for the task (throws InvalidArgument), so
  // release() can run without failing halfway.
  virtual void check_record(const TaskCacheState& st, const int32_t* tokens,
                            int32_t n_record) const = 0;
  // Releases everything the task holds; when tokens != nullptr first records the complete pages of
  // tokens[0, n_record) for reuse.
  virtual void release(TaskCacheState& st, const int32_t* tokens, int32_t n_record) = 0;
  // Forgets every reusable prefix (running tasks keep their pages).
  virtual void reset_prefix_cache() = 0;

  virtual StrategyUsage usage() const = 0;
  // Page ownership across the strategy and all live tasks. Throws InternalError.
  virtual void check_integrity(const std::vector<const TaskCacheState*>& tasks) const = 0;
};

}  // namespace vela
