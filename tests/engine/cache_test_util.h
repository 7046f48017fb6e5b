// Helpers for the cache tests: a small KV cache stack (storage, request table, workspace,
// TaskCacheManager) over a chosen strategy.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/cache/contiguous_strategy.h"
#include "engine/cache/paged_strategy.h"
#include "engine/cache/task_cache_manager.h"

namespace vela::test {

// page_size 0 selects the contiguous strategy.
inline std::unique_ptr<AllocationStrategy> make_strategy(int32_t page_size) {
  if (page_size == 0) return std::make_unique<ContiguousStrategy>();
  return std::make_unique<PagedStrategy>(page_size);
}

inline std::string strategy_label(int32_t page_size) {
  return page_size == 0 ? "contiguous" : "paged" + std::to_string(page_size);
}

struct CacheStack {
  KVStorage storage;
  ReqToTokenPool req_pool;
  InferenceWorkspace ws;
  TaskCacheManager mgr;

  // n_slots 0: max_reqs * max_ctx (what the contiguous strategy needs).
  CacheStack(int32_t page_size, int32_t max_reqs, int32_t max_ctx, int64_t n_slots = 0,
             int64_t n_layers = 2, int64_t n_kv_heads = 1, int64_t head_dim = 4,
             int32_t max_tokens = 64, int64_t vocab = 8, Device device = Device::cpu())
      : storage(n_layers, n_slots > 0 ? n_slots : int64_t{max_reqs} * max_ctx, n_kv_heads, head_dim,
                DType::kF32, device),
        req_pool(max_reqs, max_ctx, device),
        ws(WorkspaceConfig{max_reqs, max_tokens, vocab, device}),
        mgr(make_strategy(page_size), storage, req_pool, ws) {}

  PagedStrategy& paged() { return dynamic_cast<PagedStrategy&>(mgr.strategy()); }
};

inline std::vector<int32_t> token_range(int32_t n, int32_t start) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + i;
  return v;
}

// Slots of positions [0, n) of a task, read from its request-table row.
inline std::vector<int32_t> row_slots(const TaskCacheManager& mgr, ReqToTokenPool& pool,
                                      int64_t task_id, int32_t n) {
  const int32_t* row = pool.row(mgr.state(task_id)->req_row);
  return std::vector<int32_t>(row, row + n);
}

}  // namespace vela::test
