// TaskCacheManager: task lifecycle over the strategy and request table, and the per-step bind.
#include "engine/cache/task_cache_manager.h"

#include <algorithm>

#include "core/error.h"

namespace vela {

TaskCacheManager::TaskCacheManager(std::unique_ptr<AllocationStrategy> strategy, KVStorage& storage,
                                   ReqToTokenPool& req_pool, InferenceWorkspace& ws)
    : strategy_(std::move(strategy)), storage_(storage), req_pool_(req_pool), ws_(ws) {
  VELA_CHECK(strategy_ != nullptr, "TaskCacheManager: no allocation strategy");
  VELA_CHECK(storage.device() == req_pool.device() && storage.device() == ws.device(),
             "TaskCacheManager: storage (", storage.device().str(), "), request table (",
             req_pool.device().str(), ") and workspace (", ws.device().str(),
             ") must share a device");
  strategy_->attach(storage.n_slots(), req_pool.max_reqs(), req_pool.max_ctx());
}

TaskCacheState& TaskCacheManager::task(int64_t task_id, const char* op) {
  auto it = tasks_.find(task_id);
  VELA_CHECK(it != tasks_.end(), "TaskCacheManager::", op, ": unknown task ", task_id);
  return it->second;
}

const TaskCacheState* TaskCacheManager::state(int64_t task_id) const {
  auto it = tasks_.find(task_id);
  return it == tasks_.end() ? nullptr : &it->second;
}

void TaskCacheManager::write_row(const TaskCacheState& st, int32_t from, int32_t to) {
  if (to <= from) return;
  row_slots_.resize(static_cast<size_t>(to - from));  // reused: a decode step allocates nothing
  for (int32_t p = from; p < to; ++p)
    row_slots_[static_cast<size_t>(p - from)] = strategy_->slot(st, p);
  req_pool_.set(st.req_row, from, row_slots_.data(), to - from);
}

std::optional<int32_t> TaskCacheManager::alloc(int64_t task_id,
                                               const std::vector<int32_t>& tokens) {
  VELA_CHECK(tasks_.count(task_id) == 0, "TaskCacheManager::alloc: task ", task_id,
             " is already allocated");
  VELA_CHECK(!tokens.empty(), "TaskCacheManager::alloc: task ", task_id, " has an empty prompt");
  VELA_CHECK(tokens.size() <= static_cast<size_t>(max_ctx()), "TaskCacheManager::alloc: prompt of ",
             tokens.size(), " tokens exceeds the context of ", max_ctx());
  std::optional<int32_t> row = req_pool_.alloc();
  if (!row) return std::nullopt;
  TaskCacheState st;
  st.task_id = task_id;
  st.uid = next_uid_++;
  st.req_row = *row;
  st.prompt_len = static_cast<int32_t>(tokens.size());
  st.epoch = epoch_;
  // The last prompt token is always recomputed: its logits start the generation.
  strategy_->acquire_prefix(st, tokens, st.prompt_len - 1);
  VELA_ASSERT(st.cached_len < st.prompt_len, "cached the whole prompt");
  st.kv_len = st.reserved_len = st.cached_len;
  // The row was wiped when freed; map the reused pages for *this* request (the seeds' prefix bug).
  write_row(st, 0, std::min(strategy_->capacity(st), max_ctx()));
  prefix_hit_tokens_ += st.cached_len;
  int32_t cached = st.cached_len;
  tasks_.emplace(task_id, std::move(st));
  return cached;
}

bool TaskCacheManager::extend(int64_t task_id, int32_t n_new) {
  TaskCacheState& st = task(task_id, "extend");
  VELA_CHECK(n_new >= 0, "TaskCacheManager::extend: negative n_new ", n_new);
  int64_t target = static_cast<int64_t>(st.kv_len) + n_new;
  VELA_CHECK(target <= max_ctx(), "TaskCacheManager::extend: task ", task_id, " would reach ",
             target, " tokens, past the context of ", max_ctx());
  if (target <= st.reserved_len) return true;
  int32_t old_cap = std::min(strategy_->capacity(st), max_ctx());
  if (!strategy_->reserve(st, static_cast<int32_t>(target))) return false;
  st.reserved_len = static_cast<int32_t>(target);
  write_row(st, old_cap, std::min(strategy_->capacity(st), max_ctx()));
  return true;
}

void TaskCacheManager::release(int64_t task_id, const int32_t* tokens, int32_t n_record) {
  auto it = tasks_.find(task_id);
  VELA_ASSERT(it != tasks_.end(), "release of unknown task ", task_id);
  strategy_->release(it->second, tokens, n_record);
  req_pool_.free(it->second.req_row);
  tasks_.erase(it);
}

void TaskCacheManager::free(int64_t task_id, const std::vector<int32_t>& tokens,
                            bool record_prefix) {
  TaskCacheState& st = task(task_id, "free");
  if (!record_prefix || st.epoch != epoch_) {
    release(task_id, nullptr, 0);
    return;
  }
  int32_t n_record = std::min(static_cast<int32_t>(tokens.size()), st.kv_len);
  strategy_->check_record(st, tokens.data(), n_record);  // throws before anything changes
  release(task_id, tokens.data(), n_record);
}

void TaskCacheManager::truncate(int64_t task_id, int32_t kv_len) {
  TaskCacheState& st = task(task_id, "truncate");
  VELA_CHECK(kv_len >= st.cached_len && kv_len <= st.kv_len, "TaskCacheManager::truncate: task ",
             task_id, " to ", kv_len, " positions, outside [cached ", st.cached_len, ", kv ",
             st.kv_len, "]");
  st.kv_len = kv_len;
}

void TaskCacheManager::rollback(int64_t task_id) {
  if (tasks_.count(task_id) == 0) return;
  release(task_id, nullptr, 0);
}

void TaskCacheManager::copy_slots(int32_t dst, int32_t src, int32_t n) {
  // Per layer, where a run of slots is contiguous (CUDA copies into strided views are unsupported).
  for (Tensor* t : {&storage_.k, &storage_.v}) {
    for (int64_t layer = 0; layer < storage_.n_layers(); ++layer) {
      Tensor l = t->select(0, layer);
      Tensor to = l.slice(0, dst, dst + n);
      to.copy_(l.slice(0, src, src + n));
    }
  }
}

std::optional<int32_t> TaskCacheManager::fork(int64_t src_task_id, int64_t new_task_id) {
  VELA_CHECK(tasks_.count(new_task_id) == 0, "TaskCacheManager::fork: task ", new_task_id,
             " is already allocated");
  const TaskCacheState& src = task(src_task_id, "fork");
  std::optional<int32_t> row = req_pool_.alloc();
  if (!row) return std::nullopt;
  TaskCacheState dst;
  dst.task_id = new_task_id;
  dst.uid = next_uid_++;
  dst.req_row = *row;
  dst.prompt_len = src.prompt_len;
  dst.epoch = src.epoch;
  auto copy = [this](int32_t d, int32_t s, int32_t n) { copy_slots(d, s, n); };
  if (!strategy_->fork(src, dst, copy)) {
    req_pool_.free(*row);
    return std::nullopt;
  }
  dst.kv_len = dst.reserved_len = src.kv_len;
  write_row(dst, 0, std::min(strategy_->capacity(dst), max_ctx()));
  int32_t kv_len = dst.kv_len;
  tasks_.emplace(new_task_id, std::move(dst));
  return kv_len;
}

BoundBatch TaskCacheManager::bind(const std::vector<BindItem>& items) {
  const int32_t n_seqs = static_cast<int32_t>(items.size());
  VELA_CHECK(n_seqs > 0, "TaskCacheManager::bind: empty batch");
  VELA_CHECK(n_seqs <= ws_.max_seqs(), "TaskCacheManager::bind: ", n_seqs,
             " sequences exceed the workspace's ", ws_.max_seqs());
  // Validate everything before touching any state.
  std::vector<TaskCacheState*>& sts = bind_states_;
  sts.resize(items.size());
  int64_t n_tokens = 0, n_logits = 0;
  const bool with_ids = items[0].ids != nullptr;
  for (size_t i = 0; i < items.size(); ++i) {
    const BindItem& it = items[i];
    TaskCacheState& st = task(it.task_id, "bind");
    VELA_CHECK(it.n_new >= 1, "TaskCacheManager::bind: task ", it.task_id, " appends ", it.n_new,
               " tokens");
    VELA_CHECK(st.kv_len + it.n_new <= st.reserved_len, "TaskCacheManager::bind: task ", it.task_id,
               " positions [", st.kv_len, ", ", st.kv_len + it.n_new,
               ") are not reserved (reserved ", st.reserved_len, "; call extend first)");
    VELA_CHECK((it.ids != nullptr) == with_ids,
               "TaskCacheManager::bind: give token ids for all items or none");
    VELA_ASSERT(it.expected_kv_len < 0 || it.expected_kv_len == st.kv_len, "task ", it.task_id,
                " has ", it.expected_kv_len, " tokens computed by the caller but kv_len ",
                st.kv_len, " in the cache");
    VELA_CHECK(it.n_logits >= 1 && it.n_logits <= it.n_new, "TaskCacheManager::bind: task ",
               it.task_id, " asks for ", it.n_logits, " logits rows of its ", it.n_new, " tokens");
    sts[i] = &st;
    n_tokens += it.n_new;
    n_logits += it.n_logits;
  }
  std::vector<uint64_t>& uids = bind_uids_;
  uids.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) uids[i] = sts[i]->uid;
  std::sort(uids.begin(), uids.end());
  VELA_CHECK(std::adjacent_find(uids.begin(), uids.end()) == uids.end(),
             "TaskCacheManager::bind: a task appears twice in one step");
  VELA_CHECK(n_tokens <= ws_.max_tokens(), "TaskCacheManager::bind: ", n_tokens,
             " tokens exceed the workspace's ", ws_.max_tokens(), " per step");
  VELA_CHECK(n_logits <= ws_.max_logit_rows(), "TaskCacheManager::bind: ", n_logits,
             " logits rows exceed the workspace's ", ws_.max_logit_rows());

  // Fill every entry on every step: nothing is read back from an earlier one, so a recycled row or
  // a re-allocated task can never replay stale metadata (and a captured graph reads only this).
  auto [ids, pos, loc, rows, lens, qo, kvp, last] = ws_.host_pointers();
  int32_t t = 0, max_len = 0, n_last = 0;
  int64_t kv_total = 0;
  qo[0] = kvp[0] = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    TaskCacheState& st = *sts[i];
    const int32_t* row = req_pool_.row(st.req_row);
    for (int32_t j = 0; j < items[i].n_new; ++j, ++t) {
      int32_t p = st.kv_len + j;
      VELA_ASSERT(row[p] != ReqToTokenPool::kNoSlot, "task ", st.task_id, " position ", p,
                  " has no slot in its row");
      pos[t] = p;
      loc[t] = row[p];
      if (with_ids) ids[t] = items[i].ids[j];
    }
    st.kv_len += items[i].n_new;
    rows[i] = st.req_row;
    lens[i] = st.kv_len;
    qo[i + 1] = t;
    kv_total += st.kv_len;
    VELA_ASSERT(kv_total <= INT32_MAX, "kv_indptr overflows int32");
    kvp[i + 1] = static_cast<int32_t>(kv_total);
    for (int32_t j = items[i].n_logits; j >= 1; --j) last[n_last++] = t - j;
    max_len = std::max(max_len, st.kv_len);
  }
  if (with_ids) ws_.upload(t, n_seqs);  // else the caller stages the ids, then uploads
  req_pool_.sync();

  BoundBatch b;
  b.kv.k_cache = storage_.k;
  b.kv.v_cache = storage_.v;
  b.kv.req_to_token = req_pool_.table();
  b.kv.req_pool_indices = ws_.req_pool_indices.slice(0, 0, n_seqs);
  b.kv.seq_lens = ws_.seq_lens.slice(0, 0, n_seqs);
  b.kv.qo_indptr = ws_.qo_indptr.slice(0, 0, n_seqs + 1);
  b.kv.kv_indptr = ws_.kv_indptr.slice(0, 0, n_seqs + 1);
  b.kv.out_cache_loc = ws_.out_cache_loc.slice(0, 0, t);
  b.kv.max_len = max_len;
  b.input_ids = ws_.input_ids.slice(0, 0, t);
  b.positions = ws_.positions.slice(0, 0, t);
  b.logits_indices = ws_.logits_indices.slice(0, 0, n_last);
  b.n_tokens = t;
  b.n_seqs = n_seqs;
  b.n_logits = n_last;
  return b;
}

int32_t TaskCacheManager::peek_prefix(const std::vector<int32_t>& tokens) const {
  if (tokens.empty()) return 0;
  int32_t n_max = std::min(static_cast<int32_t>(tokens.size()) - 1, max_ctx());
  return strategy_->peek_prefix(tokens, n_max);
}

void TaskCacheManager::invalidate_prefix_cache() {
  strategy_->reset_prefix_cache();
  ++epoch_;
}

TaskCacheManager::Stats TaskCacheManager::stats() const {
  StrategyUsage u = strategy_->usage();
  Stats s;
  s.page_size = u.page_size;
  s.pages_total = u.pages_total;
  s.pages_free = u.pages_free;
  s.pages_used = u.pages_total - u.pages_free;
  s.pages_cached = u.pages_cached;
  s.pages_evictable = u.pages_evictable;
  s.prefix_hit_tokens = prefix_hit_tokens_;
  s.n_tasks = static_cast<int64_t>(tasks_.size());
  return s;
}

int64_t TaskCacheManager::n_available_tokens() const {
  StrategyUsage u = strategy_->usage();
  return (u.pages_free + u.pages_evictable) * u.page_size;
}

void TaskCacheManager::check_integrity() const {
  req_pool_.check_integrity();
  VELA_ASSERT(req_pool_.n_free() + static_cast<int32_t>(tasks_.size()) == req_pool_.max_reqs(),
              "rows: ", req_pool_.n_free(), " free + ", tasks_.size(),
              " tasks != ", req_pool_.max_reqs());
  std::vector<uint8_t> row_used(static_cast<size_t>(req_pool_.max_reqs()), 0);
  std::vector<const TaskCacheState*> all;
  all.reserve(tasks_.size());
  for (const auto& [id, st] : tasks_) {
    VELA_ASSERT(st.task_id == id, "task ", id, " state names task ", st.task_id);
    VELA_ASSERT(req_pool_.in_use(st.req_row), "task ", id, " row ", st.req_row, " is not in use");
    VELA_ASSERT(!row_used[static_cast<size_t>(st.req_row)], "row ", st.req_row,
                " is held by two tasks");
    row_used[static_cast<size_t>(st.req_row)] = 1;
    VELA_ASSERT(0 <= st.cached_len && st.cached_len <= st.kv_len && st.kv_len <= st.reserved_len &&
                    st.reserved_len <= max_ctx(),
                "task ", id, " lengths out of order: cached ", st.cached_len, " kv ", st.kv_len,
                " reserved ", st.reserved_len, " max_ctx ", max_ctx());
    VELA_ASSERT(st.cached_len < st.prompt_len, "task ", id, " cached its whole prompt");
    int32_t cap = std::min(strategy_->capacity(st), max_ctx());
    VELA_ASSERT(cap >= st.reserved_len, "task ", id, " capacity below its reservation");
    const int32_t* row = req_pool_.row(st.req_row);
    for (int32_t p = 0; p < max_ctx(); ++p) {
      int32_t want = p < cap ? strategy_->slot(st, p) : ReqToTokenPool::kNoSlot;
      VELA_ASSERT(row[p] == want, "task ", id, " row ", st.req_row, " position ", p, " maps to ",
                  row[p], ", expected ", want);
      VELA_ASSERT(want == ReqToTokenPool::kNoSlot || (want >= 0 && want < storage_.n_slots()),
                  "task ", id, " slot ", want, " outside the storage");
    }
    all.push_back(&st);
  }
  strategy_->check_integrity(all);
}

}  // namespace vela
