// TaskCacheManager: the KV cache as the scheduler sees it — one TaskCacheState per task, request
// rows from the ReqToTokenPool, slots from the AllocationStrategy, and bind(), which writes one
// step's metadata into the InferenceWorkspace in place and returns views of it. All cleanup goes
// through one path (free / rollback). Capacity outcomes are return values (nullopt / false);
// misuse (unknown task, bind past the reservation) throws InvalidArgument. Owned by the scheduler
// loop thread; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/cache/allocation_strategy.h"
#include "engine/cache/kv_storage.h"
#include "engine/cache/req_to_token_pool.h"
#include "engine/cache/task_cache_state.h"
#include "engine/runtime/inference_workspace.h"
#include "nn/kv_cache_view.h"

namespace vela {

// This step, task `task_id` appends n_new tokens (a prefill chunk or one decode token). When `ids`
// is given, its n_new token ids are copied into the workspace's input_ids.
struct BindItem {
  int64_t task_id = -1;
  int32_t n_new = 0;
  const int32_t* ids = nullptr;
  // When >= 0: the caller's count of tokens with KV (Task::n_computed); bind asserts that it
  // equals the task's kv_len, so token ids and positions can never drift apart.
  int32_t expected_kv_len = -1;
  // Logits rows wanted: the item's last n_logits positions (1..n_new; speculative verification
  // asks for all of them).
  int32_t n_logits = 1;
};

struct BoundBatch {
  KVCacheView kv;         // int32 metadata views of the workspace + the storage and request table
  Tensor input_ids;       // [n_tokens] i32 view of the workspace (filled when BindItem::ids given)
  Tensor positions;       // [n_tokens] i32
  Tensor logits_indices;  // [n_logits] i32: the last n_logits rows of each item, in item order
  int32_t n_tokens = 0;
  int32_t n_seqs = 0;
  int32_t n_logits = 0;
};

class TaskCacheManager {
 public:
  TaskCacheManager(std::unique_ptr<AllocationStrategy> strategy, KVStorage& storage,
                   ReqToTokenPool& req_pool, InferenceWorkspace& ws);

  // Starts a task for `tokens` (its prompt): takes a request row and reuses the longest cached
  // page-aligned prefix, never the whole prompt (at least one token is recomputed so there are
  // logits). Returns the number of cached tokens, or nullopt when no row is free (capacity).
  // Throws InvalidArgument for a known task id, an empty prompt or one longer than max_ctx.
  std::optional<int32_t> alloc(int64_t task_id, const std::vector<int32_t>& tokens);
  // Reserves KV slots for the task's next n_new positions [kv_len, kv_len + n_new) (idempotent:
  // positions already reserved are kept), evicting unreferenced radix leaves if needed. false =
  // out of pages; then the task is unchanged. Throws InvalidArgument past max_ctx.
  bool extend(int64_t task_id, int32_t n_new);
  // Finishes a task. When record_prefix, the complete pages over tokens (prompt + generated
  // tokens; only the first kv_len have KV and only those count) go into the prefix cache, unless
  // the cache was invalidated since the task started. Releases the row and unshared pages.
  void free(int64_t task_id, const std::vector<int32_t>& tokens, bool record_prefix);
  // The cleanup path for preemption, cancellation and errors: releases everything the task holds
  // without recording; the task may alloc again from scratch. Unknown ids are ignored.
  void rollback(int64_t task_id);
  // Speculative decoding: forgets the KV of positions [kv_len, task's kv_len) (rejected drafts).
  // Their slots stay reserved and are overwritten by the next bind; the prefix cache is untouched
  // (those positions were never recorded). Throws InvalidArgument when kv_len is past the task's
  // or below its cached prefix.
  void truncate(int64_t task_id, int32_t kv_len);
  // Starts `new_task_id` as a copy of `src_task_id`'s first kv_len positions (n > 1 samples of one
  // prompt): complete pages are shared, a partial last page is copied (call after the forward that
  // computed them). nullopt when no row or page is free; else the new task's kv_len.
  std::optional<int32_t> fork(int64_t src_task_id, int64_t new_task_id);

  // Fills the workspace for this step (tokens packed in item order; positions kv_len ..
  // kv_len + n_new - 1; out_cache_loc their slots; seq_lens the kv_len after; qo/kv indptr
  // cumulative; logits_indices each item's last row) and returns views of it. kv_len advances
  // here. Throws InvalidArgument on an empty batch, an unknown or repeated task, n_new < 1,
  // positions not reserved by extend, or more than the workspace holds.
  BoundBatch bind(const std::vector<BindItem>& items);

  const TaskCacheState* state(int64_t task_id) const;
  // Tokens a prompt would reuse from the prefix cache right now (no side effects).
  int32_t peek_prefix(const std::vector<int32_t>& tokens) const;
  // After a weight update: cached KV belongs to the old policy. Running tasks keep their pages but
  // will not record them.
  void invalidate_prefix_cache();

  struct Stats {
    int64_t pages_total = 0, pages_used = 0, pages_free = 0, pages_cached = 0;
    int64_t prefix_hit_tokens = 0;  // cumulative cached_len over all allocs
    int64_t n_tasks = 0;
    int64_t pages_evictable = 0;  // cached pages no task uses (freed on demand)
    int32_t page_size = 0;        // slots per page; contiguous: max_ctx (one page per row)
  };
  Stats stats() const;
  int32_t n_free_rows() const { return req_pool_.n_free(); }
  // Tokens that could still be reserved (free pages plus evictable cached pages).
  int64_t n_available_tokens() const;
  int32_t max_ctx() const { return req_pool_.max_ctx(); }
  const AllocationStrategy& strategy() const { return *strategy_; }
  AllocationStrategy& strategy() { return *strategy_; }
  KVStorage& storage() { return storage_; }
  ReqToTokenPool& req_pool() { return req_pool_; }
  InferenceWorkspace& workspace() { return ws_; }

  // Every page accounted exactly once (free, owned by tasks, or held by the radix), ref counts and
  // radix locks consistent, rows unique, each task's request-table row equal to its slots and
  // kNoSlot past them. Throws InternalError.
  void check_integrity() const;

 private:
  std::unique_ptr<AllocationStrategy> strategy_;
  KVStorage& storage_;
  ReqToTokenPool& req_pool_;
  InferenceWorkspace& ws_;
  std::unordered_map<int64_t, TaskCacheState> tasks_;
  // bind() scratch, reused every step (a steady decode loop allocates nothing).
  std::vector<TaskCacheState*> bind_states_;
  std::vector<uint64_t> bind_uids_;
  std::vector<int32_t> row_slots_;  // write_row() scratch
  uint64_t next_uid_ = 1;
  uint64_t epoch_ = 0;
  int64_t prefix_hit_tokens_ = 0;

  TaskCacheState& task(int64_t task_id, const char* op);
  // Writes the request-table entries for positions [from, to) of the task.
  void write_row(const TaskCacheState& st, int32_t from, int32_t to);
  // The one release path: free (tokens given when recording) and rollback.
  void release(int64_t task_id, const int32_t* tokens, int32_t n_record);
  void copy_slots(int32_t dst, int32_t src, int32_t n);
};

}  // namespace vela
