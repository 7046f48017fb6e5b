// ContiguousStrategy: fixed per-row slot ranges.
#include "engine/cache/contiguous_strategy.h"

#include "core/error.h"

namespace vela {

void ContiguousStrategy::attach(int64_t n_slots, int32_t max_reqs, int32_t max_ctx) {
  VELA_CHECK(n_slots >= static_cast<int64_t>(max_reqs) * max_ctx, "ContiguousStrategy needs ",
             static_cast<int64_t>(max_reqs) * max_ctx, " KV slots (max_reqs ", max_reqs,
             " x max_ctx ", max_ctx, "), the storage has ", n_slots);
  max_reqs_ = max_reqs;
  max_ctx_ = max_ctx;
}

void ContiguousStrategy::acquire_prefix(TaskCacheState& st, const std::vector<int32_t>&, int32_t) {
  VELA_ASSERT(st.req_row >= 0 && st.req_row < max_reqs_, "ContiguousStrategy: bad row ",
              st.req_row);
  st.cached_len = 0;
  ++n_active_;
}

bool ContiguousStrategy::reserve(TaskCacheState& st, int32_t n_tokens) {
  VELA_ASSERT(n_tokens <= max_ctx_, "ContiguousStrategy::reserve: ", n_tokens, " > max_ctx");
  return true;  // the row's slots are always there
}

bool ContiguousStrategy::fork(const TaskCacheState& src, TaskCacheState& dst,
                              const std::function<void(int32_t, int32_t, int32_t)>& copy_slots) {
  VELA_ASSERT(dst.req_row >= 0 && dst.req_row < max_reqs_, "ContiguousStrategy: bad row");
  if (src.kv_len > 0) copy_slots(slot(dst, 0), slot(src, 0), src.kv_len);
  dst.cached_len = src.cached_len;
  ++n_active_;
  return true;
}

void ContiguousStrategy::release(TaskCacheState& st, const int32_t*, int32_t) {
  VELA_ASSERT(n_active_ > 0, "ContiguousStrategy::release without a task");
  --n_active_;
}

StrategyUsage ContiguousStrategy::usage() const {
  StrategyUsage u;
  u.page_size = max_ctx_;
  u.pages_total = max_reqs_;
  u.pages_free = max_reqs_ - n_active_;
  return u;
}

void ContiguousStrategy::check_integrity(const std::vector<const TaskCacheState*>& tasks) const {
  VELA_ASSERT(static_cast<int32_t>(tasks.size()) == n_active_, "ContiguousStrategy counts ",
              n_active_, " tasks, the manager holds ", tasks.size());
  for (const TaskCacheState* t : tasks) {
    VELA_ASSERT(t->pages.empty() && t->cached_len == 0 && t->prefix_node < 0, "contiguous task ",
                t->task_id, " holds pages or a cached prefix");
    VELA_ASSERT(t->reserved_len <= max_ctx_, "task ", t->task_id, " reserved past max_ctx");
  }
}

}  // namespace vela
