// DraftModel: draft-model speculation. A second, small Transformer sharing the target's tokenizer,
// run by the engine's loop thread on the same device, with its own paged KV cache (a
// TaskCacheManager of its own over its own KVStorage, request table and workspace: the same cache
// code as the target's), its own Executor (CUDA graphs for its decode steps), a Sampler on its
// device that draws the drafts, and a CPU Sampler for the target's p rows of sampled requests.
//
// Each step, for every sequence the scheduler chose to speculate with m drafts (propose()):
//  1. catch-up: the draft's KV follows the sequence's tokens; whatever it has not seen yet (the
//     prompt on a sequence's first speculative step, else the 1 or 2 tokens the last verification
//     emitted) is fed in one batched ragged forward (chunked by the step token budget);
//  2. m - 1 batched one-token decode steps over all speculating sequences; after each forward
//     x_j ~ q_j is drawn on the draft's device by the one sampler (ops/sampling.h, one launch for
//     the batch) with the SAME transform as the target's sampling (the request's SamplingParams
//     and the context prompt + output + drafts[0 .. j): penalties, logit bias, temperature,
//     top-k, top-p, min-p; greedy: the argmax) and the Philox uniform (seed, kDraftDrawStream +
//     sample index, output position). Only the drafted ids come back to the host, plus, for
//     sampled (non-greedy) rows, the row q_j itself (SamplerRow::want_probs) for the general rule;
//     greedy rows copy no logits or distribution rows at all.
// Constrained samples (Task::matcher): each x_j is drawn under the grammar's mask after the
// drafts before it (the matcher walks along them during propose() and is rolled back at its end),
// so q_j is the masked draft distribution and every draft is grammar-valid; a sample's drafts stop
// after one that leaves the grammar terminated. verify() masks p_j the same way (the target rows'
// masks from the scheduler's BatchMasks), so the rule stays exact on the masked distributions.
// verify() then applies the general rule (rejection.h, verify_draft) to each position, p_j being
// the target's distribution from its verification logits row under the same transform; greedy rows
// go through the point-mass rule in the scheduler instead (identical for one-hot p and q).
// accepted() truncates the draft KV to the tokens the target kept (TaskCacheManager::truncate);
// release() frees it with the task (finish, cancellation, preemption, restart).
// Owned by the Engine, used by the scheduler loop thread only; not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/cache/task_cache_manager.h"
#include "engine/constrain/batch_masks.h"
#include "engine/engine_config.h"
#include "engine/runtime/sampler.h"
#include "engine/task.h"
#include "model/transformer.h"

namespace vela {

class KVStorage;
class ReqToTokenPool;
class InferenceWorkspace;
class Executor;
class Tokenizer;

class DraftModel {
 public:
  // Throws InvalidArgument naming the mismatch when the draft cannot draft for the target: a
  // different vocabulary size, different token strings for some id (when both have a tokenizer),
  // a context shorter than max_ctx, or a different device / dtype.
  static void check_compatible(const ModelConfig& target, const Tokenizer* target_tokenizer,
                               const Transformer& draft, const Tokenizer* draft_tokenizer,
                               int32_t max_ctx, Device device, DType dtype);

  // cfg: the engine's (validated, max_ctx / n_kv_slots resolved); target_executor: the executor
  // whose CUDA stream the loop thread returns to after drafting.
  DraftModel(Transformer model, const EngineConfig& cfg, const Executor& target_executor);
  ~DraftModel();
  DraftModel(const DraftModel&) = delete;
  DraftModel& operator=(const DraftModel&) = delete;

  struct Job {
    Task* task = nullptr;
    int32_t n_drafts = 0;  // wanted; task->drafts is filled with that many, or cleared
    int32_t item = -1;     // the caller's batch item (unused here)
  };
  // Drafts for every job (batched forwards). A job whose draft KV cannot be reserved gets none
  // (task->drafts cleared): it decodes normally this step.
  void propose(std::vector<Job>& jobs);
  // A job list the caller may fill for propose() (reused: no allocation once warm).
  std::vector<Job>& job_scratch() { return job_scratch_; }

  // The general rule over t's m = t.drafts.size() drafts: target_logits rows [first_row, first_row
  // + m] are the target's verification logits (any device), results[0 .. m] the scheduler's
  // samples of those rows (their top_logprobs are reused; results[m] is the bonus token when every
  // draft is accepted). Fills `emitted` with the a accepted drafts and the correction (or bonus)
  // token, logprobs recomputed for the tokens that differ from results[j]; returns a.
  // masks (constrained t; else null): masks->row_bits(first_mask_row + j) is the mask of the
  // target's row j, applied to its p_j (and its logprobs) as it was to the sampled rows.
  int32_t verify(const Task& t, const Tensor& target_logits, int32_t first_row,
                 const SampleResult* results, std::vector<SampleResult>& emitted,
                 const constrain::BatchMasks* masks = nullptr, int32_t first_mask_row = 0);

  // After verification of t's m drafts with a accepted (before the tokens are emitted; n_before =
  // t.n_tokens() then): the draft KV keeps what the emitted tokens confirm.
  void accepted(const Task& t, int32_t n_before, int32_t n_accepted);
  // The task is done with its KV (finished: record its prefix for reuse; else dropped). No-op when
  // the draft never saw it.
  void release(const Task& t, bool record_prefix);

  // The draft cache's own check_integrity, and every draft task alive in the target cache.
  void check_integrity(const TaskCacheManager& target) const;

  const ModelConfig& config() const { return model_->config; }
  struct Stats {
    int64_t forwards = 0;       // draft forwards run
    double seconds = 0;         // wall time of propose() (forwards + q + draws)
    int64_t kv_pages_used = 0;  // draft KV pages in use (tasks + its prefix cache)
    int64_t kv_pages_cached = 0;
    int64_t n_tasks = 0;
  };
  Stats stats() const;

 private:
  struct JobState {
    int32_t fed = 0;  // next position of the task's tokens to feed
    int32_t n_tokens = 0;
    int32_t n_walked = 0;  // drafts its matcher has accepted (rolled back when propose() ends)
  };
  // x_j ~ q_j for the job of each forward output row (job_of_row[r] < 0: none), on the device;
  // sampled rows also keep q_j (q_).
  void draw(const Tensor& logits, const std::vector<int32_t>& job_of_row, int32_t j,
            std::vector<Job>& jobs);
  // Binds items whose ids are set: the ids go into the workspace's host staging (packed in item
  // order) and the items bind without them, so the executor's upload is the step's only one.
  BoundBatch bind_staged(std::vector<BindItem>& items);
  // The context output + extra[0 .. n) for penalties, in a reused buffer.
  const std::vector<int32_t>* context(const Task& t, const std::vector<int32_t>& extra, int32_t n);

  std::unique_ptr<Transformer> model_;
  EngineConfig cfg_;
  const Executor& target_executor_;
  std::unique_ptr<KVStorage> storage_;
  std::unique_ptr<ReqToTokenPool> req_pool_;
  std::unique_ptr<InferenceWorkspace> ws_;
  std::unique_ptr<TaskCacheManager> cache_;
  std::unique_ptr<Executor> executor_;
  Sampler sampler_;                               // CPU, one row: the target's p in verify()
  std::unique_ptr<Sampler> draw_sampler_;         // the draft's device, max_seqs rows: the drafts
  std::unique_ptr<constrain::BatchMasks> masks_;  // constrained jobs' draw masks (lazily made)
  int64_t vocab_ = 0;

  // propose() scratch, reused.
  std::vector<JobState> job_state_;
  std::vector<std::vector<int32_t>> job_tokens_;
  std::unordered_map<int64_t, std::vector<float>> q_;  // task id -> [n_drafts, vocab] (sampled)
  Tensor host_logits_;                                 // [kMaxDraftTokens + 1, vocab] f32 CPU
  Tensor row_scratch_;                                 // [1, vocab] f32 CPU
  std::vector<float> p_;                               // [vocab]
  std::vector<float> processed_;                       // [vocab] p's logits after penalties, bias
  std::vector<int32_t> ctx_;
  std::vector<Job> job_scratch_;
  std::vector<BindItem> items_;
  std::vector<int32_t> job_of_item_, job_of_row_;
  std::vector<SamplerRow> one_row_ = std::vector<SamplerRow>(1);
  // draw() scratch: one row per forward row, penalty contexts (deque: stable addresses), results,
  // and the greedy params of rows without a job (catch-up chunks before a sequence's last token).
  std::vector<SamplerRow> draw_rows_;
  std::deque<std::vector<int32_t>> draw_ctx_;
  std::vector<SampleResult> draw_out_;
  SamplingParams filler_;
  Stats stats_;
};

}  // namespace vela
