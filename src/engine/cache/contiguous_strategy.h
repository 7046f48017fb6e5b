// ContiguousStrategy: request row r owns KV slots [r * max_ctx, (r + 1) * max_ctx); position p of
// the task on row r lives in slot r * max_ctx + p. No pages to run out of (the row is the budget)
// and no prefix reuse. The storage must hold max_reqs * max_ctx slots.
#pragma once

#include "engine/cache/allocation_strategy.h"

namespace vela {

class ContiguousStrategy final : public AllocationStrategy {
 public:
  ContiguousStrategy() = default;

  std::string name() const override { return "contiguous"; }
  void attach(int64_t n_slots, int32_t max_reqs, int32_t max_ctx) override;
  void acquire_prefix(TaskCacheState& st, const std::vector<int32_t>& tokens,
                      int32_t n_max) override;
  int32_t peek_prefix(const std::vector<int32_t>&, int32_t) const override { return 0; }
  bool reserve(TaskCacheState& st, int32_t n_tokens) override;
  int32_t capacity(const TaskCacheState& st) const override { return st.reserved_len; }
  int32_t slot(const TaskCacheState& st, int32_t pos) const override {
    return st.req_row * max_ctx_ + pos;
  }
  bool fork(const TaskCacheState& src, TaskCacheState& dst,
            const std::function<void(int32_t, int32_t, int32_t)>& copy_slots) override;
  void check_record(const TaskCacheState&, const int32_t*, int32_t) const override {}
  void release(TaskCacheState& st, const int32_t* tokens, int32_t n_record) override;
  void reset_prefix_cache() override {}
  StrategyUsage usage() const override;
  void check_integrity(const std::vector<const TaskCacheState*>& tasks) const override;

 private:
  int32_t max_reqs_ = 0, max_ctx_ = 0;
  int32_t n_active_ = 0;  // tasks holding a row's slots
};

}  // namespace vela
