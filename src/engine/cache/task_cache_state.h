// TaskCacheState: everything the KV cache knows about one task (one sequence being generated):
// its request row, how far its KV reaches, the pages backing it and the prefix it reused. Owned by
// TaskCacheManager; the AllocationStrategy edits the page fields.
#pragma once

#include <cstdint>
#include <vector>

namespace vela {

struct TaskCacheState {
  int64_t task_id = -1;
  uint64_t uid = 0;            // unique per alloc: a task allocated again after rollback is new
  int32_t req_row = -1;        // row of the ReqToTokenPool
  int32_t kv_len = 0;          // positions [0, kv_len) are computed (or bound in the current step)
  int32_t reserved_len = 0;    // positions [0, reserved_len) have KV slots (extend)
  int32_t prompt_len = 0;      // tokens given to alloc
  int32_t cached_len = 0;      // prompt tokens reused from the prefix cache at alloc
  std::vector<int32_t> pages;  // paged: page backing positions [i * page_size, (i + 1) * page_size)
  std::vector<uint64_t> page_hashes;  // paged: chained hashes of the prompt's complete pages
  int32_t prefix_node = -1;           // paged: radix node locked for the reused prefix (-1: none)
  uint64_t prefix_epoch = 0;          // radix epoch of prefix_node (stale after invalidation)
  uint64_t epoch = 0;  // manager epoch at alloc: the prefix is recorded only if unchanged
};

}  // namespace vela
