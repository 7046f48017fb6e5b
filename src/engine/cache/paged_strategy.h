// PagedStrategy: KV slots in pages of page_size from a PagePool, with exact-prefix reuse through a
// RadixCache. A task's page list backs positions [i * page_size, (i + 1) * page_size); its first
// cached_len / page_size pages come from the radix (shared, locked), the rest are its own. When a
// task is freed with its tokens, its complete pages enter the radix; pages nobody references are
// evicted LRU-first when the pool runs dry. page_size 1 degenerates to per-token pages.
#pragma once

#include <memory>

#include "engine/cache/allocation_strategy.h"
#include "engine/cache/page_pool.h"
#include "engine/cache/radix_cache.h"

namespace vela {

class PagedStrategy final : public AllocationStrategy {
 public:
  explicit PagedStrategy(int32_t page_size);

  std::string name() const override;
  void attach(int64_t n_slots, int32_t max_reqs, int32_t max_ctx) override;
  void acquire_prefix(TaskCacheState& st, const std::vector<int32_t>& tokens,
                      int32_t n_max) override;
  int32_t peek_prefix(const std::vector<int32_t>& tokens, int32_t n_max) const override;
  bool reserve(TaskCacheState& st, int32_t n_tokens) override;
  int32_t capacity(const TaskCacheState& st) const override {
    return static_cast<int32_t>(st.pages.size()) * page_size_;
  }
  int32_t slot(const TaskCacheState& st, int32_t pos) const override {
    return st.pages[static_cast<size_t>(pos / page_size_)] * page_size_ + pos % page_size_;
  }
  bool fork(const TaskCacheState& src, TaskCacheState& dst,
            const std::function<void(int32_t, int32_t, int32_t)>& copy_slots) override;
  void check_record(const TaskCacheState& st, const int32_t* tokens,
                    int32_t n_record) const override;
  void release(TaskCacheState& st, const int32_t* tokens, int32_t n_record) override;
  void reset_prefix_cache() override;
  StrategyUsage usage() const override;
  void check_integrity(const std::vector<const TaskCacheState*>& tasks) const override;

  int32_t page_size() const { return page_size_; }
  PagePool& pool() { return *pool_; }
  const PagePool& pool() const { return *pool_; }
  RadixCache& radix() { return *radix_; }
  const RadixCache& radix() const { return *radix_; }

 private:
  int32_t page_size_;
  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<RadixCache> radix_;

  // n more free pages, evicting unlocked radix leaves if needed; false (nothing evicted) when
  // even full eviction could not provide them.
  bool make_room(int32_t n);
  bool prefix_valid(const TaskCacheState& st) const {
    return st.prefix_node >= 0 && st.prefix_epoch == radix_->epoch();
  }
};

}  // namespace vela
