// Scheduler implementation: admission, batch planning with preemption, sampling and emission.
#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/env.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/startup_log.h"
#include "model/lora_adapter.h"
#include "ops/gemm_tuning.h"

namespace vela {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The prefix-cache key of a task's first n tokens: KV computed under a LoRA adapter belongs to that
// adapter, so its key carries the slot above the token id (vocabularies are below 2^24, checked
// by the Engine); the base model's keys are the token ids themselves.
std::vector<int32_t> prefix_key(const Task& t, int32_t n) {
  std::vector<int32_t> key = t.tokens(n);
  const int32_t slot = t.request->lora_slot;
  if (slot >= 0)
    for (int32_t& id : key) id += (slot + 1) << 24;
  return key;
}

}  // namespace

Scheduler::Scheduler(const EngineConfig& cfg, TaskCacheManager& cache, Executor& executor,
                     Sampler& sampler, InferenceWorkspace& ws, const Tokenizer* tokenizer,
                     std::vector<int32_t> eos_ids, DraftModel* draft)
    : cfg_(cfg),
      cache_(cache),
      executor_(executor),
      sampler_(sampler),
      ws_(ws),
      tokenizer_(tokenizer),
      eos_ids_(std::move(eos_ids)),
      timeline_(ws.device()),
      overlap_min_rows_(static_cast<int32_t>(env_int("VELA_OVERLAP_MIN_ROWS", 1, 1, 1024))) {
  // Every per-step scratch list holds at most one entry per row: sized once, never grown.
  [n = static_cast<size_t>(cfg.max_seqs)](auto&... v) { (v.reserve(n), ...); }(
      items_, item_tasks_, sample_rows_, sample_out_, sample_tasks_, sample_src_, token_events_,
      plan_order_, flight_.tasks, done_tasks_, next_tasks_, next_rows_, flight_items_, flight_rows_,
      retired_);
  // CUDA engines launch the forward asynchronously: the previous step's token events are pushed
  // while it runs. CPU forwards run on this thread: push at once.
  defer_token_events_ = sampler.device().is_cuda();
  if (cfg.speculative.enabled()) spec_ = std::make_unique<Speculator>(cfg.speculative);  // spec
  draft_ = draft;                                                                        // spec
  prefix_policy_ = cfg.prefill_policy == "prefix";
  // Resolved by the Engine (auto: CUDA; never dynamic NTK, speculation or LoRA).
  overlap_ = cfg.overlap_steps == 1;
  if (overlap_) next_ids_ = executor_.next_decode_ids();
}

bool Scheduler::submit(const std::shared_ptr<const Request>& req, const RequestHandlePtr& handle) {
  std::lock_guard<std::mutex> lock(inbox_mu_);
  {
    std::lock_guard<std::mutex> s(stats_mu_);
    if (stats_.waiting + static_cast<int64_t>(inbox_.size()) >= cfg_.max_waiting) return false;
  }
  uint64_t req_seed = req->params.seed.has_value()
                          ? *req->params.seed
                          : (static_cast<uint64_t>(philox_u32(cfg_.seed, 1, handle->id())) << 32) |
                                philox_u32(cfg_.seed, 2, handle->id());
  for (int32_t i = 0; i < req->params.n; ++i) {
    auto t = std::make_unique<Task>();
    t->id = next_task_id_++;
    t->handle = handle;
    t->request = req;
    t->index = i;
    t->seed = req_seed;
    if (tokenizer_ != nullptr) t->detok = std::make_unique<StreamingDecoder>(*tokenizer_);
    t->stop = std::make_unique<StopChecker>(req->params.stop);
    if (req->grammar) t->matcher = std::make_unique<constrain::GrammarMatcher>(req->grammar);
    inbox_.push_back(std::move(t));
  }
  inbox_cv_.notify_all();
  return true;
}

void Scheduler::request_stop() {
  stop_.store(true);
  inbox_cv_.notify_all();
}

bool Scheduler::idle() const {
  std::lock_guard<std::mutex> lock(inbox_mu_);
  std::lock_guard<std::mutex> s(stats_mu_);
  return inbox_.empty() && stats_.running == 0 && stats_.waiting == 0;
}

EngineStats Scheduler::stats() const {
  std::lock_guard<std::mutex> s(stats_mu_);
  EngineStats st = stats_;
  st.policy_version = policy_version_.load();
  return st;
}

void Scheduler::run() {
  executor_.enter_thread();  // CUDA: every launch of this thread goes to the engine's stream
  while (!stop_.load()) {
    bool worked = false;
    {
      StepGate::Hold hold = gate_.enter_step();
      try {
        worked = step();
        // A step launched before its predecessor was read is completed under the same hold:
        // whoever enters the gate next (a weight update, pause()) finds the GPU idle and every
        // sampled token processed. It launches no further step once someone waits
        // (overlap_allowed).
        while (flight_.active) {
          end_loop_iteration();
          step();
        }
        // Idle: capture a decode graph queued at start-up (one per iteration, so a request that
        // arrives meanwhile waits for one capture at most).
        if (!worked) {
          ops::GemmTuningScope tune_gemms;  // VELA_GEMM_TUNE=1 (ops/gemm_tuning.h)
          worked = executor_.capture_queued_graph();
        }
      } catch (const std::exception& e) {
        fail_running(e.what());
        worked = true;
      }
    }
    if (!worked) {
      std::unique_lock<std::mutex> lock(inbox_mu_);
      inbox_cv_.wait_for(lock, std::chrono::milliseconds(50),
                         [&] { return !inbox_.empty() || stop_.load() || gate_.n_outside() > 0; });
    }
    end_loop_iteration();
  }
  // Shutdown: everything still queued or running is cancelled (no partial state left behind).
  StepGate::Hold hold = gate_.enter_step();
  drain_inbox();
  for (auto& t : running_) finish(*t, FinishReason::kCancelled);
  for (auto& t : waiting_) finish(*t, FinishReason::kCancelled);
  running_.clear();
  waiting_.clear();
  update_stats(0, 0);
  publish_token_events();
  publish_final_events();
}

void Scheduler::end_loop_iteration() {
  {
    std::lock_guard<std::mutex> lock(iter_mu_);
    loop_iterations_.fetch_add(1);
  }
  iter_cv_.notify_all();
}

void Scheduler::wait_loop_iteration(uint64_t after, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(iter_mu_);
  iter_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                    [&] { return loop_iterations_.load() > after || stop_.load(); });
}

bool Scheduler::finish_old_in_flight() const {
  auto pinned = [](const Task& t) {
    return t.params().weight_update_policy() == WeightUpdatePolicy::kFinishOld &&
           (t.admitted || !t.output.empty());
  };
  for (const auto& t : running_)
    if (t->request && pinned(*t)) return true;
  for (const auto& t : waiting_)
    if (t->request && pinned(*t)) return true;
  return false;
}

void Scheduler::apply_weight_update(uint64_t v, std::unique_ptr<cuda::StreamEvent> weights_ready,
                                    int64_t steps_at_call) {
  {
    std::lock_guard<std::mutex> s(stats_mu_);
    stats_.update_wait_steps = stats_.steps - steps_at_call;
  }
  policy_version_.store(v);
  weights_ready_ = std::move(weights_ready);
  std::vector<std::unique_ptr<Task>> restarted;
  for (auto it = running_.begin(); it != running_.end();) {
    Task& t = **it;
    if (t.params().weight_update_policy() == WeightUpdatePolicy::kRestart) {
      restart(t);
      restarted.push_back(std::move(*it));
      it = running_.erase(it);
      continue;
    }
    if (t.n_computed > 0) t.kv_from_older = true;  // kMixed (kFinishOld cannot be running here)
    ++it;
  }
  for (auto& t : waiting_)
    if (t->params().weight_update_policy() == WeightUpdatePolicy::kRestart && !t->output.empty())
      restart(*t);
  // Restarted samples go first, in their admission order.
  for (auto it = restarted.rbegin(); it != restarted.rend(); ++it)
    waiting_.push_front(std::move(*it));
}

void Scheduler::restart(Task& t) {
  publish_token_events();  // this stream's earlier tokens first, decoded by the old decoder
  if (t.admitted) cache_.rollback(t.id);
  release_draft(t, false);  // spec
  t.admitted = false;
  t.n_computed = 0;
  t.kv_from_older = false;
  t.output.clear();
  t.completion = Completion{};
  t.cached_reported = false;
  if (tokenizer_ != nullptr) t.detok = std::make_unique<StreamingDecoder>(*tokenizer_);
  t.stop = std::make_unique<StopChecker>(t.params().stop);
  if (t.matcher) t.matcher->reset();
  StreamEvent ev;
  ev.index = t.index;
  ev.restarted = true;
  t.handle->push(std::move(ev));
  std::lock_guard<std::mutex> s(stats_mu_);
  ++stats_.restarts;
}

void Scheduler::fail_running(const std::string& what) {
  // A step that throws (a bug, or a device error) fails the requests it carried, not the process:
  // their KV is rolled back and the loop goes on with the queue.
  VELA_LOG_ERROR("[sched] step failed: ", what, "; failing ", running_.size(),
                 " running request(s)");
  for (auto& t : running_)
    finish(*t, FinishReason::kError, std::string("engine step failed: ") + what);
  running_.clear();
  flight_.active = false;  // its samples are dropped with its tasks
  retired_.clear();
  try {
    sampler_.abandon();
  } catch (const std::exception& e) {
    VELA_LOG_ERROR("[sched] dropping the samples in flight: ", e.what());
  }
  update_stats(0, 0);
  publish_final_events();
}

void Scheduler::drain_inbox() {
  std::lock_guard<std::mutex> lock(inbox_mu_);
  while (!inbox_.empty()) {
    waiting_.push_back(std::move(inbox_.front()));
    inbox_.pop_front();
  }
}

void Scheduler::handle_cancellations() {
  for (auto& t : running_)
    if (t->handle->cancel_requested()) finish(*t, FinishReason::kCancelled);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->handle->cancel_requested()) {
      finish(**it, FinishReason::kCancelled);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  remove_finished();
}

void Scheduler::order_waiting_by_prefix() {
  // Sorting costs a radix walk per waiting prompt each step: past 256 waiting, plain FCFS (as
  // SGLang does). Tasks that were admitted before (preempted, restarted) and prompts passed over
  // by max_seqs later ones keep the front, in queue order; then the longest cached prefix first.
  if (waiting_.size() < 2 || waiting_.size() > 256 ||
      static_cast<int32_t>(running_.size()) >= cfg_.max_seqs)
    return;
  auto first = [&](const Task& t) { return t.admit_seq != 0 || t.n_passed >= cfg_.max_seqs; };
  prefix_keyed_.clear();
  for (size_t i = 0; i < waiting_.size(); ++i) {
    const Task& t = *waiting_[i];
    prefix_keyed_.emplace_back(
        first(t) ? INT32_MAX : cache_.peek_prefix(prefix_key(t, t.n_tokens())), i);
  }
  std::stable_sort(prefix_keyed_.begin(), prefix_keyed_.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  // Permute in place through the reused scratch (no allocation once warm).
  prefix_sorted_.clear();
  for (const auto& [k, i] : prefix_keyed_) prefix_sorted_.push_back(std::move(waiting_[i]));
  for (size_t i = 0; i < prefix_sorted_.size(); ++i) waiting_[i] = std::move(prefix_sorted_[i]);
  prefix_sorted_.clear();
}

void Scheduler::admit() {
  if (prefix_policy_) order_waiting_by_prefix();
  int64_t newest_admitted = 0;
  for (auto it = waiting_.begin();
       it != waiting_.end() && static_cast<int32_t>(running_.size()) < cfg_.max_seqs;) {
    Task& t = **it;
    if (t.params().max_tokens == 0) {  // nothing to generate
      finish(t, FinishReason::kLength);
      it = waiting_.erase(it);
      continue;
    }
    if (waits_for_leader(t) ||
        (hold_finish_old_.load() && t.output.empty() &&
         t.params().weight_update_policy() == WeightUpdatePolicy::kFinishOld)) {
      ++it;
      continue;
    }
    std::optional<int32_t> cached = cache_.alloc(t.id, prefix_key(t, t.n_tokens()));
    if (!cached) break;  // no row or pages now; retry next step
    t.n_computed = *cached;
    if (!t.cached_reported) {
      t.completion.cached_tokens = *cached;
      t.cached_reported = true;
    }
    t.admitted = true;
    t.admit_seq = ++admit_seq_;
    newest_admitted = std::max(newest_admitted, t.id);
    running_.push_back(std::move(*it));
    it = waiting_.erase(it);
  }
  if (prefix_policy_)
    for (auto& t : waiting_)
      if (t->id < newest_admitted) ++t->n_passed;
}

bool Scheduler::waits_for_leader(const Task& t) const {
  if (t.index == 0 || !t.output.empty()) return false;
  for (const auto& l : waiting_)
    if (l->handle == t.handle && l->index == 0) return l->request != nullptr;
  for (const auto& l : running_)
    if (l->handle == t.handle && l->index == 0)
      return l->output.empty() && l->n_computed < static_cast<int32_t>(l->prompt().size());
  return false;  // the leader finished: compute the prompt again (or reuse the prefix cache)
}

void Scheduler::fill_masks(const Tensor& logits) {
  if (masks_) masks_->clear();
  for (size_t j = 0; j < sample_tasks_.size(); ++j) {
    Task* t = sample_tasks_[j];
    if (!t->matcher) continue;
    if (!masks_)  // one row per sample row at most (speculation: verify rows included)
      masks_ = std::make_unique<constrain::BatchMasks>(logits.size(1), sampler_.max_rows(),
                                                       logits.device());
    // spec: a task's 1 + drafts verify rows are consecutive, masked along its drafts
    const auto n_drafts = static_cast<int32_t>(t->drafts.size());
    masks_->add(*t->matcher, static_cast<int32_t>(j), t->drafts.data(), n_drafts);
    j += static_cast<size_t>(n_drafts);
  }
  if (masks_) masks_->fill();
}

int Scheduler::launch_sampling(const Tensor& logits) {
  const int64_t n = static_cast<int64_t>(sample_rows_.size());
  bool identity = true;  // sample row j reads forward row j (every decode step)
  for (int64_t j = 0; j < n; ++j) identity = identity && sample_src_[static_cast<size_t>(j)] == j;
  fill_masks(logits);
  // Not identity (forked n > 1 siblings share their leader's row): there may be more sample rows
  // than forward rows, so gather into the workspace instead of slicing the logits. The sampler
  // reads its rows only (penalties and bias go to its own scratch), on either device.
  Tensor rows;
  if (identity) {
    rows = logits.slice(0, 0, n);
  } else {
    rows = ws_.logits.slice(0, 0, n);
    for (int64_t j = 0; j < n; ++j) {
      Tensor dst = rows.select(0, j);
      dst.copy_(logits.select(0, sample_src_[static_cast<size_t>(j)]));
    }
  }
  const bool masked = masks_ && masks_->size() > 0;
  if (masked) masks_->apply(rows);  // in place: one forward row per row here
  sampler_.stage(sample_rows_);
  // The LM head's argmax pieces (decode steps on CUDA) hold while the rows are its rows, unmasked.
  Tensor chunk_max = identity && !masked ? executor_.decode_chunk_max() : Tensor();
  // The tokens also go where an overlapped step after this one reads its input ids (that step's
  // rows are these rows, in this order: launch_overlapped(sample_tasks_)).
  launch_sampler(rows, chunk_max.defined() && chunk_max.size(0) >= n ? chunk_max : Tensor());
  return sampler_.download();
}

void Scheduler::fork_siblings(Task& leader, int32_t logits_row) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Task& s = **it;
    if (s.handle != leader.handle || s.index == 0 || !s.output.empty() ||
        static_cast<int32_t>(running_.size()) >= cfg_.max_seqs) {
      ++it;
      continue;
    }
    std::optional<int32_t> kv = cache_.fork(leader.id, s.id);
    if (!kv) break;  // no row or page now: the sibling is admitted normally later
    VELA_ASSERT(*kv == leader.n_computed, "fork copied ", *kv, " positions, the leader has ",
                leader.n_computed);
    s.n_computed = *kv;
    s.kv_from_older = leader.kv_from_older;
    s.completion.cached_tokens = leader.completion.cached_tokens;
    s.cached_reported = true;
    s.admitted = true;
    s.admit_seq = ++admit_seq_;
    sample_rows_.push_back(
        SamplerRow{&s.params(), &s.prompt(), &s.output, s.seed, 0, static_cast<uint64_t>(s.index)});
    sample_tasks_.push_back(&s);
    sample_src_.push_back(logits_row);
    running_.push_back(std::move(*it));
    it = waiting_.erase(it);
  }
}

void Scheduler::preempt(Task* victim) {
  VELA_LOG_DEBUG("[sched] preempting task ", victim->id, " (", victim->n_tokens(), " tokens)");
  cache_.rollback(victim->id);
  release_draft(*victim, false);  // spec
  victim->n_computed = 0;
  victim->kv_from_older = false;  // recomputed on the current weights
  victim->admitted = false;
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->get() == victim) {
      waiting_.push_front(std::move(*it));
      running_.erase(it);
      break;
    }
  }
  std::lock_guard<std::mutex> s(stats_mu_);
  ++stats_.preemptions;
}

bool Scheduler::reserve(Task* t, int32_t n_new) {
  bool ok = cache_.extend(t->id, n_new);
  while (!ok) {
    // Out of pages: preempt the newest running task that is not planned yet (maybe t itself).
    Task* victim = nullptr;
    for (auto rit = running_.rbegin(); rit != running_.rend(); ++rit) {
      Task* c = rit->get();
      if (std::find(item_tasks_.begin(), item_tasks_.end(), c) == item_tasks_.end()) {
        victim = c;
        break;
      }
    }
    if (victim == nullptr) return false;
    preempt(victim);
    if (victim == t) return false;
    ok = cache_.extend(t->id, n_new);
  }
  return true;
}

bool Scheduler::plan() {
  items_.clear();
  item_tasks_.clear();
  n_prefill_items_ = n_decode_items_ = 0;
  int32_t budget = cfg_.max_tokens_per_step;
  auto is_decode = [](const Task* t) {
    return t->n_tokens() - t->n_computed == 1 && t->n_computed > 0;
  };
  auto add = [&](Task* t, int32_t n_new) {
    items_.push_back({t->id, n_new});
    items_.back().n_logits = 1 + static_cast<int32_t>(t->drafts.size());  // spec: verify all
    item_tasks_.push_back(t);
    budget -= n_new;
  };
  // 1. Every decode row (one token left to feed), oldest first: they always fit (the budget is
  // >= max_seqs), so running requests keep their inter-token latency while prompts stream in.
  // Speculative drafts only take what the decode rows after this one leave.
  plan_order_.clear();
  for (const auto& t : running_)
    if (is_decode(t.get())) plan_order_.push_back(t.get());
  int32_t n_decode_left = static_cast<int32_t>(plan_order_.size());
  for (Task* t : plan_order_) {
    --n_decode_left;
    if (!t->admitted) continue;  // preempted by an earlier row's reservation
    t->drafts.clear();
    int32_t n_new = 1;
    if (spec_) n_new = plan_drafts(*t, budget - n_decode_left);  // spec: 1 + drafts
    bool ok = cache_.extend(t->id, n_new);
    if (!ok && n_new > 1) {  // spec: no pages for the drafts: decode plainly
      t->drafts.clear();
      n_new = 1;
    }
    if (!ok && !reserve(t, n_new)) continue;
    add(t, n_new);
    ++n_decode_items_;
  }
  // 2. Prompt chunks (prefills, recomputes after preemption) under what is left of the budget:
  // in admission order (fcfs) or fewest tokens left first (prefix); at most max_prefill_chunk
  // tokens of one prompt and max_prefills_per_step prompts per step.
  plan_order_.clear();
  for (const auto& t : running_)
    if (!is_decode(t.get()) && t->n_tokens() > t->n_computed) plan_order_.push_back(t.get());
  if (prefix_policy_)
    std::stable_sort(plan_order_.begin(), plan_order_.end(), [](const Task* a, const Task* b) {
      return a->n_tokens() - a->n_computed < b->n_tokens() - b->n_computed;
    });
  for (Task* t : plan_order_) {
    if (budget <= 0) break;
    if (cfg_.max_prefills_per_step > 0 && n_prefill_items_ >= cfg_.max_prefills_per_step) break;
    if (!t->admitted) continue;  // preempted by an earlier reservation
    t->drafts.clear();
    int32_t n_new = std::min(t->n_tokens() - t->n_computed, budget);
    if (cfg_.max_prefill_chunk > 0) n_new = std::min(n_new, cfg_.max_prefill_chunk);
    if (!reserve(t, n_new)) continue;
    add(t, n_new);
    ++n_prefill_items_;
  }
  // Decode rows preempted above are back in waiting_; any other runnable one left out is deferred.
  int64_t deferred = 0;
  for (const auto& t : running_)
    if (is_decode(t.get()) &&
        std::find(item_tasks_.begin(), item_tasks_.end(), t.get()) == item_tasks_.end())
      ++deferred;
  if (deferred > 0) {
    std::lock_guard<std::mutex> s(stats_mu_);
    stats_.decode_rows_deferred += deferred;
  }
  return !items_.empty();
}

bool Scheduler::step() {
  const double t_step = now_s();
  if (flight_.active) return step_in_flight(t_step);
  drain_inbox();
  handle_cancellations();
  admit();
  if (!plan()) {
    update_stats(0, 0);
    publish_token_events();
    publish_final_events();
    last_step_end_ = 0;  // an idle turn is not time between steps
    return false;
  }
  phase_t_[StepPhases::kSchedule] = t_step;
  if (draft_) propose_drafts();  // spec: the draft model drafts every speculating item at once
  if (weights_ready_) {  // CUDA: new weights written on another stream are complete first
    weights_ready_->make_current_stream_wait();
    weights_ready_.reset();
  }
  for (size_t k = 0; k < items_.size(); ++k) items_[k].expected_kv_len = item_tasks_[k]->n_computed;
  phase_t_[StepPhases::kBind] = now_s();
  ws_.wait_staging();  // the previous step's metadata upload has left the host buffer
  BoundBatch batch = cache_.bind(items_);
  int32_t* ids = ws_.host.input_ids.data<int32_t>();
  int32_t off = 0;
  int64_t n_prompt_tokens = 0;
  for (size_t k = 0; k < items_.size(); ++k) {
    Task* t = item_tasks_[k];
    for (int32_t i = 0; i < items_[k].n_new; ++i) {
      int32_t pos = t->n_computed + i, n = t->n_tokens();  // past n_tokens: the drafts (spec)
      ids[off++] = pos < n ? t->token_at(pos) : t->drafts[static_cast<size_t>(pos - n)];
    }
    n_prompt_tokens +=
        std::max<int32_t>(0, std::min<int32_t>(static_cast<int32_t>(t->prompt().size()),
                                               t->n_computed + items_[k].n_new) -
                                 t->n_computed);
  }
  VELA_ASSERT(off == batch.n_tokens, "packed ", off, " tokens but bound ", batch.n_tokens);
  if (const LoraAdapterSet* lora = executor_.model().lora_adapters.get()) {
    // Each row's adapter slot (-1 = base); the executor uploads them with the forward.
    int32_t* slots = lora->rows->host.data<int32_t>();
    off = 0;
    for (size_t k = 0; k < items_.size(); ++k)
      for (int32_t i = 0; i < items_[k].n_new; ++i)
        slots[off++] = item_tasks_[k]->request->lora_slot;
  }
  // The previous step's tokens go out while the GPU runs this forward, except before a forward
  // that is not one token per sequence (prompt chunks, speculative verify rows): the executor runs
  // it eagerly, and launching its hundreds of kernels takes longer than the pushes (they would
  // reach the clients milliseconds late, a step's worth of inter-token jitter).
  phase_t_[StepPhases::kLaunch] = now_s();
  if (batch.n_tokens != batch.n_seqs) publish_token_events();
  Tensor logits = executor_.forward(batch);
  step_tokens_ = batch.n_tokens;  // counted with the step's other stats, under one lock
  phase_t_[StepPhases::kPublish] = now_s();
  publish_token_events();
  phase_t_[StepPhases::kSample] = now_s();

  // Rows whose tokens are all computed now get a new token sampled.
  sample_rows_.clear();
  sample_tasks_.clear();
  sample_src_.clear();
  spec_ctx_used_ = 0;
  int32_t logits_row = 0;  // first logits row of item k (items with drafts have several)
  for (size_t k = 0; k < items_.size(); ++k) {
    Task* t = item_tasks_[k];
    const int32_t row = logits_row;
    logits_row += items_[k].n_logits;
    if (!t->drafts.empty()) {  // spec: n_computed moves once the drafts are verified
      queue_verify_rows(*t, row);
      continue;
    }
    t->n_computed += items_[k].n_new;
    if (t->n_computed != t->n_tokens()) continue;
    sample_rows_.push_back(SamplerRow{&t->params(), &t->prompt(), &t->output, t->seed,
                                      static_cast<uint64_t>(t->output.size()),
                                      static_cast<uint64_t>(t->index)});
    sample_tasks_.push_back(t);
    sample_src_.push_back(row);
    if (t->index == 0 && t->params().n > 1 && t->output.empty()) fork_siblings(*t, row);
  }
  int64_t n_emitted = 0;
  phase_t_[StepPhases::kProcess] = phase_t_[StepPhases::kSample];
  if (!sample_rows_.empty()) {
    const int ticket = launch_sampling(logits);
    // A plain decode step: the next one goes to the GPU before these samples are read (its
    // launch counts in this step's `sample` phase).
    // (Without prompt chunks or speculation, the sample rows are the decode items in order.)
    if (n_prefill_items_ == 0 && sample_tasks_ == item_tasks_ && can_continue(sample_tasks_))
      launch_overlapped(sample_tasks_);
    sampler_.collect(ticket, sample_out_);
    phase_t_[StepPhases::kProcess] = now_s();
    for (size_t j = 0; j < sample_rows_.size(); ++j) {
      Task& t = *sample_tasks_[j];
      if (!t.drafts.empty()) {  // spec: the task's 1 + drafts rows are consecutive
        n_emitted += accept_drafts(t, &sample_out_[j], logits, sample_src_[j]);
        j += t.drafts.size();
        t.drafts.clear();
        continue;
      }
      process_sample(t, sample_out_[j]);
      ++n_emitted;
    }
  }
  remove_finished();
  end_step(t_step, n_emitted, n_prompt_tokens);
  return true;
}

void Scheduler::end_step(double t_step, int64_t n_emitted, int64_t n_prompt_tokens) {
  phase_t_[StepPhases::kFinish] = now_s();
  const double step_s = phase_t_[StepPhases::kFinish] - t_step;
  const int64_t graphs_before = stats_.n_cuda_graphs;  // this thread is stats_' only writer
  update_stats(n_emitted, n_prompt_tokens, /*stepped=*/true, step_s);
  const StepTimeHistogram& decode_steps = stats_.step_times.decode;
  if (log_level() <= LogLevel::kDebug && decode_steps.count() >= 32 &&
      step_s > 2 * decode_steps.quantile(0.5))
    VELA_LOG_DEBUG("[scheduler] slow step ", step_s * 1e3, " ms (decode p50 ",
                   decode_steps.quantile(0.5) * 1e3, " ms): ", n_decode_items_, " decode rows, ",
                   n_prefill_items_, " prompt chunks, ", step_tokens_, " tokens, ",
                   stats_.n_cuda_graphs - graphs_before, " graphs captured");
  // A step in flight keeps the GPU busy: these tokens go out now rather than after a launch.
  if (flight_.active) publish_token_events();
  publish_final_events();
  // This step's `finish` is counted with the next step's phases (update_stats), so a stats
  // snapshot always has as many phase samples as step times.
  last_step_end_ = now_s();
  pending_finish_s_ = last_step_end_ - phase_t_[StepPhases::kFinish];
  pending_phases_ = n_prefill_items_ == 0 ? &stats_.decode_phases : &stats_.mixed_phases;
}

// ---- Overlapped steps -----------------------------------------------------------------------

bool Scheduler::overlap_allowed() const {
  // Speculation, draft models and LoRA engines never overlap (the Engine resolves overlap_steps
  // to 0: drafts come from the host's last token; per-row adapter slots are not filled by
  // launch_overlapped). New requests that could be admitted now get a normal step (admission,
  // prompt chunks); someone waiting at the gate (a weight update, pause()) or a stop request gets
  // the GPU idle at the boundary.
  if (!overlap_ || stop_.load() || gate_.n_outside() > 0) return false;
  if (!waiting_.empty() && static_cast<int32_t>(running_.size()) < cfg_.max_seqs) return false;
  std::lock_guard<std::mutex> lock(inbox_mu_);
  return inbox_.empty() || static_cast<int32_t>(running_.size()) >= cfg_.max_seqs;
}

bool Scheduler::can_continue(const std::vector<Task*>& tasks) const {
  if (static_cast<int32_t>(tasks.size()) < overlap_min_rows_ || !overlap_allowed()) return false;
  return std::all_of(tasks.begin(), tasks.end(), [&](const Task* t) { return task_continues(*t); });
}

bool Scheduler::task_continues(const Task& t) const {
  // Another token without the host: no grammar (its mask follows the token), no penalties (they
  // count it), room for one more position.
  return !t.matcher && !t.params().has_penalties() && t.n_computed < cache_.max_ctx();
}

void Scheduler::launch_overlapped(const std::vector<Task*>& tasks, const int32_t* id_rows) {
  // Reserve first: out of pages means a normal step (which may preempt). Positions reserved
  // before a failure stay reserved (extend is idempotent) for the task's next step.
  for (Task* t : tasks)
    if (!cache_.extend(t->id, 1)) return;
  flight_items_.clear();
  flight_rows_.clear();
  for (Task* t : tasks) {
    flight_items_.push_back({t->id, 1});
    flight_items_.back().expected_kv_len = t->n_computed;
    // The token sampled now is not in `output` yet: this row draws the one after it.
    flight_rows_.push_back(SamplerRow{&t->params(), &t->prompt(), &t->output, t->seed,
                                      static_cast<uint64_t>(t->output.size()) + 1,
                                      static_cast<uint64_t>(t->index)});
  }
  ws_.wait_staging();
  timeline_.mark(StepTimeline::kStart);
  BoundBatch batch = cache_.bind(flight_items_);
  timeline_.mark(StepTimeline::kBound);
  // The sampler's parameters go up with the step's other uploads, before the forward: between
  // the forward and the sampling kernel the stream would switch to a copy and back (H200,
  // bench-1b: batch64 1.641-1.645 -> 1.631-1.639 ms, batch16 1.423-1.428 -> 1.415-1.421 ms).
  sampler_.stage(flight_rows_);
  timeline_.mark(StepTimeline::kStaged);
  // The input ids are the tokens just sampled, on the device (the host's staging is stale): in
  // place where the sampler wrote them (every row continues, in order), else gathered from its
  // output rows.
  const bool in_place = ids_ahead_ && id_rows == nullptr;
  const Tensor ids = in_place ? next_ids_ : sampler_.device_tokens();
  Tensor logits = executor_.forward(batch, &ids, in_place ? nullptr : id_rows);
  timeline_.mark(StepTimeline::kForward);
  // Its rows are the logits' rows, no mask touched them: the LM head's argmax pieces hold.
  launch_sampler(logits, executor_.decode_chunk_max());
  timeline_.mark(StepTimeline::kSampled);
  flight_.ticket = sampler_.download();
  timeline_.mark(StepTimeline::kDownloaded);
  flight_.tasks.assign(tasks.begin(), tasks.end());
  flight_.active = true;
  ++n_overlapped_;
}

void Scheduler::launch_sampler(const Tensor& rows, const Tensor& chunk_max) {
  ids_ahead_ = next_ids_.defined() && rows.size(0) <= next_ids_.numel();
  sampler_.launch(rows, chunk_max, ids_ahead_ ? &next_ids_ : nullptr);
  if (ids_ahead_) ws_.mark_ids_written();
}

bool Scheduler::step_in_flight(double t_step) {
  phase_t_[StepPhases::kSchedule] = t_step;
  drain_inbox();           // new requests are admitted by the next normal step
  handle_cancellations();  // a cancelled task's row in flight is dropped below
  flight_.active = false;
  done_tasks_.swap(flight_.tasks);
  const int ticket = flight_.ticket;
  // The tasks still running continue in the next step, fed the tokens of their rows here.
  next_tasks_.clear();
  next_rows_.clear();
  for (size_t j = 0; j < done_tasks_.size(); ++j) {
    Task* t = done_tasks_[j];
    if (!t->request) continue;  // finished or cancelled after this step was launched
    ++t->n_computed;            // its KV is written by the step in flight, before anything reads it
    next_tasks_.push_back(t);
    next_rows_.push_back(static_cast<int32_t>(j));
  }
  // Phases: `launch` is the next step's (reserve, bind, forward and sampling launch); nothing is
  // bound or published apart from it here (tokens go out in `finish`, while the GPU runs it).
  phase_t_[StepPhases::kBind] = phase_t_[StepPhases::kLaunch] = now_s();
  if (can_continue(next_tasks_))
    launch_overlapped(next_tasks_,
                      next_tasks_.size() == done_tasks_.size() ? nullptr : next_rows_.data());
  phase_t_[StepPhases::kPublish] = phase_t_[StepPhases::kSample] = now_s();
  sampler_.collect(ticket, sample_out_);
  phase_t_[StepPhases::kProcess] = now_s();
  int64_t n_emitted = 0;
  for (size_t j = 0; j < done_tasks_.size(); ++j) {
    Task* t = done_tasks_[j];
    if (!t->request) continue;  // finished or cancelled after this step was launched
    process_sample(*t, sample_out_[j]);
    ++n_emitted;
  }
  retired_.clear();  // finished before the step now in flight was launched: none is in it
  remove_finished();
  n_prefill_items_ = 0;
  n_decode_items_ = step_tokens_ = static_cast<int64_t>(done_tasks_.size());
  end_step(t_step, n_emitted, 0);
  return true;
}

void Scheduler::flush_deferred_text(const Task* only) {
  for (TokenEvent& e : token_events_) {
    if (e.text_task == nullptr || (only != nullptr && e.text_task != only)) continue;
    Task& t = *e.text_task;
    e.event.text = t.stop->push(t.detok->push(e.text_token));
    t.completion.text += e.event.text;
    e.text_task = nullptr;
  }
}

void Scheduler::publish_token_events() {
  flush_deferred_text();
  for (TokenEvent& e : token_events_) e.handle->push(std::move(e.event));
  token_events_.clear();
}

void Scheduler::publish_final_events() {
  // Pending token events first (a stream's events stay in order); without a final event they may
  // wait for the next forward's launch.
  if (!final_events_.empty() || !defer_token_events_) publish_token_events();
  // After update_stats: a caller woken by its final event sees stats that include it.
  for (FinalEvent& f : final_events_) f.handle->push(std::move(f.event), &f.completion);
  final_events_.clear();
}

void Scheduler::process_sample(Task& t, const SampleResult& r) {
  const SamplingParams& p = t.params();
  static std::atomic<bool> first_token{true};  // start-up timing: the process's first token
  if (first_token.load(std::memory_order_relaxed) && first_token.exchange(false))
    startup_mark("first token sampled");
  t.output.push_back(r.token);
  StreamEvent ev;
  ev.index = t.index;
  ev.tokens.push_back(r.token);
  if (p.logprobs) ev.logprobs.push_back({r.token, r.logprob, r.top_logprobs});
  bool is_stop_token =
      contains(p.stop_token_ids, r.token) || (!p.ignore_eos && contains(eos_ids_, r.token));
  std::optional<FinishReason> reason;
  bool grammar_done = false;
  if (t.matcher) {
    bool accepted = false;
    std::string why;
    try {
      accepted = t.matcher->accept_token(r.token);
    } catch (const std::exception& e) {
      why = std::string(": ") + e.what();
    }
    if (!accepted) {
      // Only when the grammar allowed nothing (every logit masked) or a bug: never emit a token
      // the grammar rejects.
      t.output.pop_back();
      finish(t, FinishReason::kError,
             "constrained decoding: the grammar allows no token here (token " +
                 std::to_string(r.token) + " was sampled)" + why);
      return;
    }
    grammar_done = t.matcher->is_terminated();
  }
  // Without stop strings the text cannot end the sample: a token that does not end it either is
  // decoded later, when its event goes out (CUDA: after the next forward is launched).
  const bool text_decides = t.detok && t.stop->has_stop_strings();
  if (is_stop_token) {
    reason = FinishReason::kStop;
  } else if (text_decides) {
    ev.text = t.stop->push(t.detok->push(r.token));
    if (t.stop->stopped()) {
      reason = FinishReason::kStop;
      t.completion.stop_reason = t.stop->matched();
    }
  }
  if (!reason && grammar_done) reason = FinishReason::kStop;  // nothing else can follow
  if (!reason && static_cast<int32_t>(t.output.size()) >= p.max_tokens)
    reason = FinishReason::kLength;
  // Ending here: this task's deferred tokens (speculation emits several per step) are decoded
  // first, in order, and none outlives it.
  if (reason) flush_deferred_text(&t);
  const bool plain_text = t.detok && !text_decides && !is_stop_token;  // not decoded above
  const bool defer_text = plain_text && !reason && defer_token_events_;
  if (plain_text && !defer_text) ev.text = t.stop->push(t.detok->push(r.token));
  if (reason && t.detok && !t.stop->stopped())
    ev.text += t.stop->push(t.detok->flush()) + t.stop->flush();
  const uint64_t version = policy_version_.load();
  std::vector<VersionSpan>& spans = t.completion.versions;
  if (spans.empty() || spans.back().version != version)
    spans.push_back({static_cast<int32_t>(t.completion.tokens.size()), version, t.kv_from_older});
  t.completion.policy_version = version;
  t.completion.mixed_versions = t.completion.mixed_versions || spans.size() > 1 || t.kv_from_older;
  t.completion.tokens.push_back(r.token);
  t.completion.text += ev.text;
  for (const auto& lp : ev.logprobs) t.completion.logprobs.push_back(lp);
  if (reason) {
    t.completion.finish_reason = *reason;
    if (t.admitted) cache_.free(t.id, prefix_key(t, t.n_computed), /*record_prefix=*/true);
    release_draft(t, true);  // spec
    t.admitted = false;
    ev.finish = reason;
    final_events_.push_back({t.handle, std::move(ev), t.completion});
    t.request.reset();  // marks finished for remove_finished()
  } else if (defer_text) {
    token_events_.push_back({t.handle, std::move(ev), &t, r.token});
  } else {
    token_events_.push_back({t.handle, std::move(ev)});
  }
}

void Scheduler::finish(Task& t, FinishReason reason, const std::string& error) {
  if (!t.request) return;  // already finished
  flush_deferred_text();  // the completion has every token's text; no event outlives its task
  if (t.admitted) cache_.rollback(t.id);
  release_draft(t, false);  // spec
  t.admitted = false;
  t.completion.finish_reason = reason;
  t.completion.error = error;
  if (t.completion.versions.empty()) t.completion.policy_version = policy_version_.load();
  StreamEvent ev;
  ev.index = t.index;
  ev.finish = reason;
  ev.error = error;
  final_events_.push_back({t.handle, std::move(ev), t.completion});
  t.request.reset();
}

void Scheduler::remove_finished() {
  // A step in flight may still hold finished tasks: they are kept until it has been read.
  if (!flight_.active) retired_.clear();
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->request) {
      ++it;
      continue;
    }
    if (flight_.active) retired_.push_back(std::move(*it));
    it = running_.erase(it);
  }
}

void Scheduler::update_stats(int64_t n_generated, int64_t n_prompt, bool stepped,
                             double step_s) {
  std::lock_guard<std::mutex> s(stats_mu_);
  if (stepped) {  // this step's plan: prefill chunks, mixed prefill + decode, its size and time
    stats_.prefill_chunks += n_prefill_items_;
    if (n_prefill_items_ > 0 && n_decode_items_ > 0) ++stats_.mixed_steps;
    stats_.max_step_tokens = std::max<int64_t>(stats_.max_step_tokens, step_tokens_);
    StepTimes& st = stats_.step_times;
    (n_prefill_items_ == 0 ? st.decode : n_decode_items_ == 0 ? st.prefill : st.mixed)
        .observe(step_s);
    // Its phases up to `process` (they add up to step_s), the time since the last step ended,
    // and the last step's `finish` (measured after that step's stats were published).
    StepPhases& ph = n_prefill_items_ == 0 ? stats_.decode_phases : stats_.mixed_phases;
    ++ph.steps;
    for (int k = 0; k < StepPhases::kFinish; ++k)
      ph.seconds[static_cast<size_t>(k)] +=
          phase_t_[static_cast<size_t>(k) + 1] - phase_t_[static_cast<size_t>(k)];
    if (last_step_end_ > 0) ph.seconds[StepPhases::kBetween] += phase_t_[0] - last_step_end_;
    if (pending_phases_ != nullptr) pending_phases_->seconds[StepPhases::kFinish] += pending_finish_s_;
    pending_phases_ = nullptr;
  }
  double t = now_s();
  if (n_generated > 0) {
    ++stats_.steps;
    rate_window_.emplace_back(t, n_generated);
  }
  while (!rate_window_.empty() && rate_window_.front().first < t - 5.0) rate_window_.pop_front();
  int64_t sum = 0;
  for (const auto& [ts, n] : rate_window_) sum += n;
  double span = rate_window_.empty() ? 0 : std::max(1e-3, t - rate_window_.front().first);
  stats_.tokens_per_s = rate_window_.size() < 2 ? 0 : static_cast<double>(sum) / span;
  stats_.generated_tokens += n_generated;
  stats_.prompt_tokens += n_prompt;
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  // The cache belongs to the loop thread: snapshot it here, never read it from stats().
  auto cs = cache_.stats();
  stats_.kv_pages_total = cs.pages_total;
  stats_.kv_pages_used = cs.pages_used;
  stats_.kv_pages_free = cs.pages_free;
  stats_.kv_pages_cached = cs.pages_cached;
  stats_.prefix_hit_tokens = cs.prefix_hit_tokens;
  const Executor::DeviceTime& dt = executor_.device_time();
  stats_.decode_forwards_timed = dt.decode_forwards;
  stats_.other_forwards_timed = dt.other_forwards;
  stats_.decode_device_s = dt.decode_s;
  stats_.other_device_s = dt.other_s;
  stats_.decode_launch_s = dt.decode_launch_s;
  stats_.other_launch_s = dt.other_launch_s;
  stats_.n_cuda_graphs = static_cast<int64_t>(executor_.n_graphs());
  stats_.overlapped_steps = n_overlapped_;
  stats_.graph_capture_s = executor_.graph_capture_seconds();
  if (spec_) stats_.speculative = spec_->stats();
  if (draft_) draft_stats(stats_.speculative);  // spec
}

}  // namespace vela
