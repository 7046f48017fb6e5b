// Scheduler: the engine's policy, run by one loop thread. Each step it admits waiting tasks while
// KV rows and pages allow, plans one packed batch (decodes first, then prefill chunks under the
// token budget), preempts the newest task by recompute when pages run out, runs the Executor,
// samples, applies stop conditions and emits events. Cancellation is checked every step.
// Overlapped steps (EngineConfig::overlap_steps, on for CUDA engines): when a step is plain decode
// (one token per task, no grammar, penalties, speculation or LoRA) and nobody new can be admitted,
// the next decode step of the same tasks is launched before this step's samples are read, its
// input ids copied on the device from the sampler's output; the host then reads and processes
// this step's tokens while the GPU runs the next one, so the GPU does not idle for the host's
// per-step work. A task that finishes or is cancelled meanwhile wastes its row in the step in
// flight (its KV there is written into slots it has released, before any later step can reuse
// them: one stream orders them) and leaves the next step's rows. A request that could be admitted,
// a row that needs the host (grammar, penalties), or someone at the gate makes the next step a
// normal one. With overlap, which step a finished task's last row rides in (its bucket, the
// longest sequence, hence the split count and the low bits of the others) also depends on when
// the loop saw gate callers or new requests.
// submit() / request_stop() / stats() / loop_iterations() / wait_loop_iteration() are thread-safe.
// The rest run on the loop thread, or on another thread while it holds gate() (the loop is then
// between two steps): see the "between steps" block.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "engine/cache/task_cache_manager.h"
#include "engine/constrain/batch_masks.h"
#include "engine/engine_config.h"
#include "engine/request_handle.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/step_timeline.h"
#include "engine/spec/speculator.h"
#include "engine/step_gate.h"
#include "engine/step_times.h"
#include "engine/task.h"
#include "tokenizer/tokenizer.h"

namespace vela {

struct EngineStats {
  int64_t running = 0, waiting = 0;
  int64_t kv_pages_total = 0, kv_pages_used = 0, kv_pages_free = 0, kv_pages_cached = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  int64_t preemptions = 0, steps = 0;
  // Chunked prefill (EngineConfig::max_tokens_per_step ...): prompt chunks planned, steps that
  // carried decode rows and prompt tokens together, the largest forward (tokens), and decode rows
  // left out of a step while runnable (stays 0: the plan gives every decode row its token first).
  int64_t prefill_chunks = 0, mixed_steps = 0, max_step_tokens = 0, decode_rows_deferred = 0;
  double tokens_per_s = 0;  // generated tokens per second over the last few seconds
  // With EngineConfig::time_device: stream time of the forwards (metadata upload + model, sampling
  // excluded), decode steps and the others apart; counts are the forwards timed so far.
  // *_launch_s: host time spent enqueuing the same forwards.
  int64_t decode_forwards_timed = 0, other_forwards_timed = 0;
  double decode_device_s = 0, other_device_s = 0;
  double decode_launch_s = 0, other_launch_s = 0;
  uint64_t policy_version = 0;
  int64_t restarts = 0;        // samples restarted by weight updates (kRestart)
  // Steps that ran between the last weight update reaching the step gate and its effect: at
  // most the one in flight, two with overlapped steps (the one being read and the one launched
  // before the update arrived); more only while kFinishOld samples finish on the old weights.
  int64_t update_wait_steps = 0;
  int64_t overlapped_steps = 0;  // steps launched before their predecessor's samples were read
  int64_t n_cuda_graphs = 0;   // decode graphs captured so far (0 on the CPU)
  double graph_capture_s = 0;  // seconds their capture took
  // Wall time of the steps that ran a forward (plan to events), by what they carried.
  StepTimes step_times;
  StepPhases decode_phases, mixed_phases;  // decode-only steps; steps with prompt chunks
  // Speculative decoding (EngineConfig::speculative): see SpeculativeStats.
  SpeculativeStats speculative;
};

class DraftModel;

class Scheduler {
 public:
  Scheduler(const EngineConfig& cfg, TaskCacheManager& cache, Executor& executor, Sampler& sampler,
            InferenceWorkspace& ws, const Tokenizer* tokenizer, std::vector<int32_t> eos_ids,
            DraftModel* draft = nullptr);

  // Thread-safe: queues the n tasks of a request. Returns false when the queue is full.
  bool submit(const std::shared_ptr<const Request>& req, const RequestHandlePtr& handle);
  // One scheduling step; returns false when there was nothing to do.
  bool step();
  // Loop until request_stop(); sleeps while idle.
  void run();
  void request_stop();
  bool idle() const;
  // A snapshot published by the loop thread at the end of every step (and by refresh_stats()).
  EngineStats stats() const;
  // Held by the loop for each step; others enter it (fairly: at the next step boundary) to act
  // between steps.
  StepGate& gate() { return gate_; }
  // Loop iterations so far (a step, or an idle wait), and a wait until one more has ended (or
  // timeout_ms passed). Thread-safe; never call while holding gate().
  uint64_t loop_iterations() const { return loop_iterations_.load(); }
  void wait_loop_iteration(uint64_t after, int64_t timeout_ms);

  // ---- Between steps: only with gate() held --------------------------------------------------
  // Republishes the stats snapshot (e.g. after a weight update).
  void refresh_stats() { update_stats(0, 0); }
  // A sample that must finish on the current weights (WeightUpdatePolicy::kFinishOld) holds
  // KV or generated tokens: a weight update must wait.
  bool finish_old_in_flight() const;
  // While true, kFinishOld samples that have not started are not admitted (an update waits).
  void hold_finish_old(bool hold) { hold_finish_old_.store(hold); }
  // The weights changed and carry version `v`: kRestart samples in flight start again from their
  // prompt, kMixed ones that hold KV are marked mixed; `weights_ready` (CUDA, may be null) is
  // waited for on the engine's stream before the next forward. `steps_at_call`: stats().steps
  // when the update announced itself at the gate (for EngineStats::update_wait_steps).
  void apply_weight_update(uint64_t v, std::unique_ptr<cuda::StreamEvent> weights_ready,
                           int64_t steps_at_call);

 private:
  EngineConfig cfg_;
  TaskCacheManager& cache_;
  Executor& executor_;
  Sampler& sampler_;                 // on the logits' device
  std::vector<int32_t> sample_src_;  // forward logits row of each sample row
  InferenceWorkspace& ws_;
  const Tokenizer* tokenizer_;
  std::vector<int32_t> eos_ids_;

  mutable std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::deque<std::unique_ptr<Task>> inbox_;
  std::atomic<bool> stop_{false};
  StepGate gate_;
  std::atomic<uint64_t> loop_iterations_{0};
  std::mutex iter_mu_;
  std::condition_variable iter_cv_;
  std::atomic<bool> hold_finish_old_{false};
  std::unique_ptr<cuda::StreamEvent> weights_ready_;  // set between steps, consumed by step()

  std::deque<std::unique_ptr<Task>> waiting_;  // loop thread only
  std::list<std::unique_ptr<Task>> running_;   // in admission order
  int64_t next_task_id_ = 1;
  uint64_t admit_seq_ = 0;
  std::atomic<uint64_t> policy_version_{0};

  // Scratch reused every step (no per-step allocation once warm).
  std::vector<BindItem> items_;
  std::vector<Task*> item_tasks_;
  std::vector<Task*> plan_order_;  // plan(): this step's decode or prefill candidates
  // order_waiting_by_prefix() scratch: (cached tokens, position in waiting_), the sorted tasks.
  std::vector<std::pair<int32_t, size_t>> prefix_keyed_;
  std::vector<std::unique_ptr<Task>> prefix_sorted_;
  bool prefix_policy_ = false;     // EngineConfig::prefill_policy == "prefix"
  std::vector<SamplerRow> sample_rows_;
  std::vector<SampleResult> sample_out_;
  std::vector<Task*> sample_tasks_;  // the task of each sample row
  std::unique_ptr<constrain::BatchMasks> masks_;  // constrained rows' token masks (lazily made)

  // ---- Speculative decoding (engine/spec/; defined in engine/spec/scheduler_spec.cpp) --------
  std::unique_ptr<Speculator> spec_;        // null when EngineConfig::speculative is off
  DraftModel* draft_ = nullptr;             // draft-model speculation (owned by the Engine)
  std::vector<SampleResult> draft_emitted_;  // verify() output, reused
  // Per verified row with penalties: output + the drafts before it. Reused across steps (the
  // first spec_ctx_used_ are this step's; deque: stable addresses), so steady decode allocates
  // nothing here once the buffers have grown.
  std::deque<std::vector<int32_t>> spec_ctx_;
  size_t spec_ctx_used_ = 0;
  // Drafts for decode task t (fills t.drafts) within `budget` tokens for this item; returns the
  // item's n_new (1 + drafts).
  int32_t plan_drafts(Task& t, int32_t budget);
  // Queues t's 1 + drafts verification sample rows reading logits rows from `logits_row` on.
  void queue_verify_rows(Task& t, int32_t logits_row);
  // After sampling: accepts the longest draft prefix the samples match (rejection.h), rolls the
  // KV of the rejected drafts back, emits the tokens (stop conditions apply to each); returns how
  // many were emitted.
  // `logits` / `logits_row`: the forward's logits and t's first verification row (the general
  // rule of draft-model speculation reads the target's distributions from them).
  int64_t accept_drafts(Task& t, const SampleResult* results, const Tensor& logits,
                        int32_t logits_row);
  // Draft-model speculation, after plan(): the planned drafts of every speculating item are drawn
  // by the draft model in batched forwards; items whose drafts were dropped shrink to one token.
  void propose_drafts();
  // The task's KV is gone (finished: record = true; cancelled, preempted, restarted): so is its
  // draft KV.
  void release_draft(const Task& t, bool record);
  void draft_stats(SpeculativeStats& s) const;

  // Stats (read by other threads).
  mutable std::mutex stats_mu_;
  EngineStats stats_;
  std::deque<std::pair<double, int64_t>> rate_window_;

  void drain_inbox();
  void handle_cancellations();
  void admit();
  void fail_running(const std::string& what);
  // n > 1: a later sample is admitted by forking its request's sample 0 once that one has computed
  // the prompt, so the prompt is computed once and its pages are shared.
  bool waits_for_leader(const Task& t) const;
  // After the forward that completed `leader`'s prompt: forks its waiting siblings and queues a
  // sample row for each from the same forward logits row (`logits_row`).
  void fork_siblings(Task& leader, int32_t logits_row);
  // Samples every queued row from its forward logits row (masks first), on the logits' device:
  // launches the sampling and enqueues its read-back; returns the sampler's ticket.
  int launch_sampling(const Tensor& logits);
  // The token masks of the queued rows that carry a grammar.
  void fill_masks(const Tensor& logits);
  bool plan();  // fills items_; false when nothing runnable
  // Reserves KV for t's next n_new positions, preempting the newest unplanned running tasks when
  // pages run out (maybe t itself); false when t cannot run this step.
  bool reserve(Task* t, int32_t n_new);
  // prefill_policy "prefix": orders waiting_ for admission (see EngineConfig::prefill_policy).
  void order_waiting_by_prefix();
  int64_t n_prefill_items_ = 0, n_decode_items_ = 0;  // this step's plan (stats)
  int64_t step_tokens_ = 0;                             // this step's bound tokens (stats)
  // This step's phase starts (now_s(); [kFinish]: where step_s ends); the end of the last step, 0
  // after an idle turn.
  std::array<double, StepPhases::kCount> phase_t_{};
  double last_step_end_ = 0;
  double pending_finish_s_ = 0;             // the last step's `finish`, counted with the next one
  StepPhases* pending_phases_ = nullptr;    // in stats_ (the last step's kind)
  void preempt(Task* victim);
  void restart(Task& t);  // kRestart after a weight update: back to the prompt
  void process_sample(Task& t, const SampleResult& r);
  void finish(Task& t, FinishReason reason, const std::string& error = "");
  void remove_finished();
  void update_stats(int64_t n_generated, int64_t n_prompt, bool stepped = false,
                    double step_s = 0);
  void publish_final_events();
  void publish_token_events();
  // The common end of a step: stats, the slow-step log, events, phase bookkeeping.
  void end_step(double t_step, int64_t n_emitted, int64_t n_prompt_tokens);
  void end_loop_iteration();  // counts a loop iteration and wakes wait_loop_iteration()

  // ---- Overlapped steps (see the top of this file) --------------------------------------------
  struct Flight {
    bool active = false;
    std::vector<Task*> tasks;  // its rows, in order
    int ticket = -1;           // the sampler's read-back of its tokens
  };
  Flight flight_;
  bool overlap_ = false;  // EngineConfig::overlap_steps resolved for this device
  // CUDA overlap: where the sampler also writes its tokens (Executor::next_decode_ids), and
  // whether the last sampler launch did (an overlapped step then reads them in place).
  Tensor next_ids_;
  bool ids_ahead_ = false;
  int64_t n_overlapped_ = 0;
  // Finished while a step in flight may still hold them; freed once it has been read.
  std::vector<std::unique_ptr<Task>> retired_;
  std::vector<Task*> done_tasks_;       // step_in_flight(): the rows of the step it reads,
  std::vector<Task*> next_tasks_;       // those still running,
  std::vector<int32_t> next_rows_;      // and their rows in it
  std::vector<BindItem> flight_items_;  // launch_overlapped() scratch
  std::vector<SamplerRow> flight_rows_;
  StepTimeline timeline_;  // VELA_TIME_STEP_OPS=1: the GPU time of launch_overlapped's operations
  // The fewest rows an overlapped step has: 1 (single-row steps overlap too). Through session 51
  // it was 2: on the H200 a lone row measured 1.025-1.030 ms overlapped against 1.020-1.021 not.
  // With the step's copies on side streams and the tokens written in place (session 51), session
  // 52 measured 1.116 / 1.115 against 1.136 / 1.132 ms at 1K and 1.214 / 1.203 against 1.235 /
  // 1.235 at 8K (H100, alternating rounds). VELA_OVERLAP_MIN_ROWS=N (1..1024) moves it.
  const int32_t overlap_min_rows_;
  bool overlap_allowed() const;  // nothing outside the running decode rows needs a normal step
  // The next decode step of `tasks` may go to the GPU before their tokens are read: enough rows,
  // overlap_allowed(), and each task can continue (task_continues).
  bool can_continue(const std::vector<Task*>& tasks) const;
  bool task_continues(const Task& t) const;
  // Launches the next decode step of `tasks` (one token each, fed from the sampler's device
  // tokens of the step just launched: row id_rows[i] for task i, or row i when null); no-op when
  // their KV cannot be reserved.
  void launch_overlapped(const std::vector<Task*>& tasks, const int32_t* id_rows = nullptr);
  // Sampler::launch on these logits rows, the tokens also written into next_ids_ where there is
  // one (CUDA overlap) and they fit: sets ids_ahead_ and marks the workspace's ids written.
  void launch_sampler(const Tensor& rows, const Tensor& chunk_max);
  // step() while a step is in flight: maybe launches the next, then reads and processes it.
  bool step_in_flight(double t_step);

  // Token events of the last step (CUDA engines): pushed right after the next forward is launched,
  // so the per-stream pushes (a lock and a waiter wake-up each) overlap the GPU instead of adding
  // to the step; always before any final or restart event, so every stream keeps its order.
  // A token of a sample without stop strings leaves its detokenization here too (text_task set):
  // its text cannot end the sample, so it is decoded when the event goes out, off the GPU's idle
  // time, or earlier when the task finishes (in process_sample or finish) or restarts
  // (flush_deferred_text): an event never outlives its task.
  struct TokenEvent {
    RequestHandlePtr handle;
    StreamEvent event;
    Task* text_task = nullptr;  // decode `text_token` into event.text (and the completion) first
    int32_t text_token = 0;
  };
  std::vector<TokenEvent> token_events_;
  void flush_deferred_text(const Task* only = nullptr);  // only: that task's events
  bool defer_token_events_ = false;  // a DeviceSampler: the forward is asynchronous

  // Last events of finished samples, pushed after the step's stats are published.
  struct FinalEvent {
    RequestHandlePtr handle;
    StreamEvent event;
    Completion completion;
  };
  std::vector<FinalEvent> final_events_;
};

}  // namespace vela
