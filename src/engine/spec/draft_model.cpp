// DraftModel: the draft's cache and executor set-up, batched drafting, the general rejection rule
// per verified position, and the draft KV following the target's accepted tokens.
#include "engine/spec/draft_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cuda/cuda_api.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "engine/cache/contiguous_strategy.h"
#include "engine/cache/kv_storage.h"
#include "engine/cache/paged_strategy.h"
#include "engine/cache/req_to_token_pool.h"
#include "engine/cache/task_cache_manager.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/inference_workspace.h"
#include "engine/spec/rejection.h"
#include "ops/attention.h"
#include "tokenizer/tokenizer.h"

namespace vela {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// log p(token) of the row as the Sampler reports it: kRaw from the raw logits, kTempered from the
// penalised / biased row at 1 / T (greedy: T = 1).
float token_logprob(const float* raw, const float* processed, int64_t n, const SamplingParams& p,
                    int32_t token) {
  const bool tempered = p.logprobs_mode == LogprobsMode::kTempered;
  const float* row = tempered ? processed : raw;
  const double scale = tempered && !p.is_greedy() ? 1.0 / p.temperature : 1.0;
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = row[i] > m ? row[i] : m;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (row[i] > -std::numeric_limits<float>::infinity()) sum += std::exp((row[i] - m) * scale);
  return static_cast<float>((row[token] - m) * scale - std::log(sum));
}

}  // namespace

void DraftModel::check_compatible(const ModelConfig& target, const Tokenizer* target_tokenizer,
                                  const Transformer& draft, const Tokenizer* draft_tokenizer,
                                  int32_t max_ctx, Device device, DType dtype) {
  const ModelConfig& d = draft.config;
  VELA_CHECK(d.vocab_size == target.vocab_size,
             "--speculative draft: the draft model's vocab_size ", d.vocab_size,
             " differs from the target's ", target.vocab_size,
             " (a draft model must share the target's tokenizer)");
  if (target_tokenizer != nullptr && draft_tokenizer != nullptr) {
    VELA_CHECK(target_tokenizer->vocab_size() == draft_tokenizer->vocab_size(),
               "--speculative draft: the draft's tokenizer has ", draft_tokenizer->vocab_size(),
               " tokens, the target's ", target_tokenizer->vocab_size(),
               " (a draft model must share the target's tokenizer)");
    for (int32_t id = 0; id < target_tokenizer->vocab_size(); ++id) {
      std::optional<std::string> a = target_tokenizer->id_to_token(id);
      std::optional<std::string> b = draft_tokenizer->id_to_token(id);
      VELA_CHECK(a == b, "--speculative draft: token id ", id, " is '", a.value_or("<none>"),
                 "' for the target but '", b.value_or("<none>"),
                 "' for the draft (a draft model must share the target's tokenizer)");
    }
  }
  VELA_CHECK(d.max_position_embeddings >= max_ctx, "--speculative draft: the draft model's ",
             "max_position_embeddings ", d.max_position_embeddings,
             " is below the engine's context limit max_ctx ", max_ctx, " (lower max_ctx)");
  VELA_CHECK(draft.device() == device && draft.dtype() == dtype,
             "--speculative draft: the draft model must be on the target's device and dtype (",
             device.str(), ", ", dtype_name(dtype), "), got ", draft.device().str(), ", ",
             dtype_name(draft.dtype()));
  VELA_CHECK_T(
      Unsupported, !device.is_cuda() || ops::cuda_attention_head_dim_ok(d.head_dim),
      "--speculative draft: the CUDA attention kernels run head_dim a multiple of 8 up to ",
      ops::kMaxCudaHeadDim, ", but the draft model has head_dim ", d.head_dim);
  VELA_CHECK(!draft.lora_adapters,
             "--speculative draft: the draft model cannot carry LoRA adapters");
}

DraftModel::DraftModel(Transformer model, const EngineConfig& cfg, const Executor& target_executor)
    : model_(std::make_unique<Transformer>(std::move(model))),
      cfg_(cfg),
      target_executor_(target_executor),
      sampler_(model_->config.vocab_size, 1),
      vocab_(model_->config.vocab_size) {
  const ModelConfig& mc = model_->config;
  const Device dev = model_->device();
  const bool cuda = dev.is_cuda();
  const bool paged = cfg.kv_strategy == "paged";
  // Every running task holds at most its tokens + k - 1 draft positions, and the target holds at
  // least its computed tokens: the target's pool plus k drafts and a partial page per row never
  // runs out (the draft's prefix cache is evicted on demand).
  const int64_t full = static_cast<int64_t>(cfg.max_seqs) * cfg.max_ctx;
  int64_t n_slots = full;
  if (paged) {
    n_slots = std::min<int64_t>(full, cfg.n_kv_slots + static_cast<int64_t>(cfg.max_seqs) *
                                                           (cfg.speculative.k + 1 + cfg.page_size));
    n_slots = (n_slots + cfg.page_size - 1) / cfg.page_size * cfg.page_size;
  }
  storage_ = std::make_unique<KVStorage>(mc.n_layers, n_slots, mc.n_kv_heads, mc.head_dim,
                                         model_->dtype(), dev, cuda ? 1 : 0);
  req_pool_ = std::make_unique<ReqToTokenPool>(cfg.max_seqs, cfg.max_ctx, dev);
  WorkspaceConfig wc;
  wc.max_seqs = cfg.max_seqs;
  wc.max_tokens_per_step = std::max(cfg.max_tokens_per_step, cfg.max_seqs);
  wc.vocab_size = mc.vocab_size;
  wc.device = dev;
  wc.max_logit_rows = cfg.max_seqs;
  if (cuda) {
    wc.n_heads = mc.n_heads;
    wc.head_dim = mc.head_dim;
  }
  ws_ = std::make_unique<InferenceWorkspace>(wc);
  std::unique_ptr<AllocationStrategy> strategy;
  if (paged)
    strategy = std::make_unique<PagedStrategy>(cfg.page_size);
  else
    strategy = std::make_unique<ContiguousStrategy>();
  cache_ = std::make_unique<TaskCacheManager>(std::move(strategy), *storage_, *req_pool_, *ws_);
  ExecutorOptions eo;
  eo.cuda_graphs = cfg.cuda_graphs;
  eo.padding_slot = cuda ? storage_->padding_slot() : -1;
  executor_ = std::make_unique<Executor>(model_.get(), *ws_, eo);
  draw_sampler_ = std::make_unique<Sampler>(mc.vocab_size, cfg.max_seqs, dev);
  filler_.temperature = 0.0f;
  host_logits_ =
      Tensor::empty({SpeculativeConfig::kMaxDraftTokens + 1, mc.vocab_size}, DType::kF32);
  row_scratch_ = Tensor::empty({1, mc.vocab_size}, DType::kF32);
  p_.resize(static_cast<size_t>(mc.vocab_size));
  processed_.resize(static_cast<size_t>(mc.vocab_size));
  if (executor_->graphs_enabled()) {
    KVCacheView view;
    view.k_cache = storage_->k;
    view.v_cache = storage_->v;
    view.req_to_token = req_pool_->table();
    double s = executor_->capture_decode_graphs(view, std::min<int32_t>(cfg.max_ctx, 1024));
    VELA_LOG_INFO("[engine] draft model: captured ", executor_->n_graphs(),
                  " decode CUDA graphs in ", static_cast<int>(s * 1000), " ms");
  }
  VELA_LOG_INFO("[engine] draft model: ", mc.n_layers, " layers, hidden ", mc.hidden_size, ", ",
                cfg.kv_strategy, " KV ", n_slots, " slots (", storage_->k.nbytes() * 2 / (1 << 20),
                " MiB)");
}

DraftModel::~DraftModel() = default;

const std::vector<int32_t>* DraftModel::context(const Task& t, const std::vector<int32_t>& extra,
                                                int32_t n) {
  if (!t.params().has_penalties() || n == 0) return &t.output;
  ctx_.assign(t.output.begin(), t.output.end());
  ctx_.insert(ctx_.end(), extra.begin(), extra.begin() + n);
  return &ctx_;
}

void DraftModel::draw(const Tensor& logits, const std::vector<int32_t>& job_of_row, int32_t j,
                      std::vector<Job>& jobs) {
  // One sampler launch over the forward's rows on its device; rows without a job are greedy
  // fillers (no history, nothing read back but an id).
  const int64_t n_rows = logits.size(0);
  draw_rows_.clear();
  size_t n_ctx = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const int32_t i = job_of_row[static_cast<size_t>(r)];
    if (i < 0) {
      draw_rows_.push_back(SamplerRow{&filler_, nullptr, nullptr, 0, 0, 0});
      continue;
    }
    const Task& t = *jobs[static_cast<size_t>(i)].task;
    const std::vector<int32_t>* ctx = &t.output;
    if (t.params().has_penalties() && j > 0) {  // output + drafts[0 .. j), one buffer per row
      if (n_ctx == draw_ctx_.size()) draw_ctx_.emplace_back();
      std::vector<int32_t>& c = draw_ctx_[n_ctx++];
      c.assign(t.output.begin(), t.output.end());
      c.insert(c.end(), t.drafts.begin(), t.drafts.begin() + j);
      ctx = &c;
    }
    const uint64_t step = t.output.size() + static_cast<uint64_t>(j);
    SamplerRow row{&t.params(), &t.prompt(), ctx,
                   t.seed,      step,        kDraftDrawStream + static_cast<uint64_t>(t.index)};
    row.want_probs = !t.params().is_greedy();  // q_j for the general rule
    draw_rows_.push_back(row);
  }
  if (masks_) masks_->clear();
  for (int64_t r = 0; r < n_rows; ++r) {  // constrained jobs: the mask after drafts[0 .. j)
    const int32_t i = job_of_row[static_cast<size_t>(r)];
    if (i < 0 || !jobs[static_cast<size_t>(i)].task->matcher) continue;
    if (!masks_)
      masks_ = std::make_unique<constrain::BatchMasks>(vocab_, cfg_.max_seqs, logits.device());
    masks_->add(*jobs[static_cast<size_t>(i)].task->matcher, static_cast<int32_t>(r));
  }
  Tensor masked = logits;  // the forward's own logits, masked in place (read by nothing else)
  if (masks_ && masks_->size() > 0) {
    masks_->fill();
    masks_->apply(masked);
  }
  draw_sampler_->sample(masked, draw_rows_, draw_out_);  // waits for the ids
  const Tensor& probs = draw_sampler_->probabilities();
  const size_t row_bytes = static_cast<size_t>(vocab_) * sizeof(float);
  for (int64_t r = 0; r < n_rows; ++r) {
    const int32_t i = job_of_row[static_cast<size_t>(r)];
    if (i < 0) continue;
    Job& job = jobs[static_cast<size_t>(i)];
    Task& t = *job.task;
    const int32_t x = draw_out_[static_cast<size_t>(r)].token;
    t.drafts[static_cast<size_t>(j)] = x;
    if (t.matcher) {
      // Walk the grammar along the drafts; cut them where it rejects (only when its mask allowed
      // nothing) or after a token that ends it.
      bool ok = false;
      try {
        ok = t.matcher->accept_token(x);
      } catch (const Error&) {
        t.matcher->rollback(0);  // drops what the throwing step left in the arena
      }
      if (ok) ++job_state_[static_cast<size_t>(i)].n_walked;
      const int32_t keep = !ok ? j : t.matcher->is_terminated() ? j + 1 : job.n_drafts;
      if (keep < job.n_drafts) {
        job.n_drafts = keep;
        t.drafts.resize(static_cast<size_t>(keep));
      }
      if (!ok) continue;
    }
    if (t.params().is_greedy()) continue;  // point-mass verification: no q needed
    float* q = q_[t.id].data() + static_cast<int64_t>(j) * vocab_;
    const float* src = probs.data<float>() + r * probs.stride(0);
    if (probs.is_cpu())
      std::memcpy(q, src, row_bytes);
    else
      cuda::copy_bytes(q, Device::cpu(), src, probs.device(), row_bytes);
  }
}

void DraftModel::propose(std::vector<Job>& jobs) {
  const double t0 = now_s();
  executor_->enter_thread();  // CUDA: the draft's stream; back to the target's on return
  struct Back {
    const Executor& e;
    ~Back() { e.enter_thread(); }
  } back{target_executor_};
  const size_t n_jobs = jobs.size();
  job_state_.resize(n_jobs);
  if (job_tokens_.size() < n_jobs) job_tokens_.resize(n_jobs);
  auto drop = [](Job& j) {
    j.task->drafts.clear();
    j.n_drafts = 0;
  };
  int32_t max_m = 0;
  for (size_t i = 0; i < n_jobs; ++i) {
    Job& job = jobs[i];
    Task& t = *job.task;
    const int32_t n = t.n_tokens();
    job_state_[i] = JobState{};
    if (job.n_drafts <= 0) {
      drop(job);
      continue;
    }
    const TaskCacheState* st = cache_->state(t.id);
    if (st == nullptr) {
      if (!cache_->alloc(t.id, t.tokens(n))) {
        drop(job);
        continue;
      }
      st = cache_->state(t.id);
      q_[t.id];  // the task's entry lives as long as its draft KV
    }
    VELA_ASSERT(st->kv_len < n, "draft KV of task ", t.id, " covers ", st->kv_len, " of its ", n,
                " tokens");
    if (!cache_->extend(t.id, n - st->kv_len + job.n_drafts - 1)) {
      drop(job);
      continue;
    }
    job_state_[i] = JobState{st->kv_len, n, 0};
    t.drafts.resize(static_cast<size_t>(job.n_drafts));
    q_[t.id].resize(static_cast<size_t>(job.n_drafts) * static_cast<size_t>(vocab_));
    max_m = std::max(max_m, job.n_drafts);
  }
  std::vector<BindItem>& items = items_;
  std::vector<int32_t>&job_of_item = job_of_item_, &job_of_row = job_of_row_;
  // 1. Catch-up: the tokens the draft has not seen, chunked by the step budget; a job's q_0 comes
  // from the forward that feeds its last token.
  while (true) {
    items.clear();
    job_of_item.clear();
    int32_t budget = ws_->max_tokens();
    for (size_t i = 0;
         i < n_jobs && budget > 0 && items.size() < static_cast<size_t>(cfg_.max_seqs); ++i) {
      JobState& js = job_state_[i];
      if (jobs[i].n_drafts <= 0 || js.fed >= js.n_tokens) continue;
      const Task& t = *jobs[i].task;
      const int32_t n_new = std::min(js.n_tokens - js.fed, budget);
      std::vector<int32_t>& ids = job_tokens_[i];
      ids.resize(static_cast<size_t>(n_new));
      for (int32_t p = 0; p < n_new; ++p) ids[static_cast<size_t>(p)] = t.token_at(js.fed + p);
      BindItem it;
      it.task_id = t.id;
      it.n_new = n_new;
      it.ids = ids.data();
      it.expected_kv_len = js.fed;
      items.push_back(it);
      job_of_item.push_back(static_cast<int32_t>(i));
      budget -= n_new;
    }
    if (items.empty()) break;
    BoundBatch batch = bind_staged(items);
    Tensor logits = executor_->forward(batch);
    ++stats_.forwards;
    job_of_row.clear();
    for (size_t r = 0; r < items.size(); ++r) {
      JobState& js = job_state_[static_cast<size_t>(job_of_item[r])];
      js.fed += items[r].n_new;
      job_of_row.push_back(js.fed == js.n_tokens ? job_of_item[r] : -1);
    }
    draw(logits, job_of_row, 0, jobs);
  }
  // 2. One-token steps: feed x_{j-1}, draw x_j, for every job that wants more than j drafts.
  for (int32_t j = 1; j < max_m; ++j) {
    items.clear();
    job_of_row.clear();
    for (size_t i = 0; i < n_jobs; ++i) {
      if (jobs[i].n_drafts <= j) continue;
      const Task& t = *jobs[i].task;
      BindItem it;
      it.task_id = t.id;
      it.n_new = 1;
      it.ids = &t.drafts[static_cast<size_t>(j - 1)];
      it.expected_kv_len = job_state_[i].n_tokens + j - 1;
      items.push_back(it);
      job_of_row.push_back(static_cast<int32_t>(i));
    }
    if (items.empty()) break;  // every job's drafts were cut where its grammar ends
    BoundBatch batch = bind_staged(items);
    Tensor logits = executor_->forward(batch);
    ++stats_.forwards;
    draw(logits, job_of_row, j, jobs);
  }
  for (size_t i = 0; i < n_jobs; ++i)  // matchers back to the state after `output`
    if (jobs[i].task->matcher) jobs[i].task->matcher->rollback(job_state_[i].n_walked);
  stats_.seconds += now_s() - t0;
}

BoundBatch DraftModel::bind_staged(std::vector<BindItem>& items) {
  ws_->wait_staging();  // the last upload has left the host buffer
  int64_t n_tokens = 0;
  for (const BindItem& it : items) n_tokens += it.n_new;
  VELA_ASSERT(n_tokens <= ws_->max_tokens(), "draft step of ", n_tokens, " tokens past the ",
              ws_->max_tokens(), " its workspace holds");
  int32_t* staged = ws_->host.input_ids.data<int32_t>();
  for (BindItem& it : items) {
    staged = std::copy(it.ids, it.ids + it.n_new, staged);
    it.ids = nullptr;
  }
  return cache_->bind(items);
}

int32_t DraftModel::verify(const Task& t, const Tensor& target_logits, int32_t first_row,
                           const SampleResult* results, std::vector<SampleResult>& emitted,
                           const constrain::BatchMasks* masks, int32_t first_mask_row) {
  const int32_t m = static_cast<int32_t>(t.drafts.size());
  auto qit = q_.find(t.id);
  VELA_ASSERT(qit != q_.end() && qit->second.size() >= static_cast<size_t>(m) * vocab_,
              "no draft distribution for task ", t.id);
  const float* q = qit->second.data();
  Tensor rows = target_logits.slice(0, first_row, first_row + m + 1);
  if (!rows.is_cpu()) {
    Tensor h = host_logits_.slice(0, 0, m + 1);
    h.copy_(rows);
    rows = h;
  }
  const SamplingParams& p = t.params();
  std::vector<SamplerRow>& one = one_row_;
  emitted.clear();
  for (int32_t j = 0; j < m; ++j) {
    float* raw = row_scratch_.data<float>();  // the target's row j, masked as it was sampled
    std::memcpy(raw, rows.data<float>() + j * rows.stride(0),
                static_cast<size_t>(vocab_) * sizeof(float));
    if (const uint32_t* bits = masks ? masks->row_bits(first_mask_row + j) : nullptr)
      for (int64_t i = 0; i < vocab_; ++i)
        if (!((bits[i >> 5] >> (i & 31)) & 1u)) raw[i] = -std::numeric_limits<float>::infinity();
    const uint64_t step = t.output.size() + static_cast<uint64_t>(j);
    one[0] = SamplerRow{&p,     &t.prompt(), context(t, t.drafts, j),
                        t.seed, step,        static_cast<uint64_t>(t.index)};
    sampler_.distribution(row_scratch_, one, p_.data(), p.logprobs ? processed_.data() : nullptr);
    const uint64_t idx = static_cast<uint64_t>(t.index);
    bool accepted = false;
    const int32_t token = verify_draft(
        p_.data(), q + static_cast<int64_t>(j) * vocab_, vocab_, t.drafts[static_cast<size_t>(j)],
        philox_uniform(t.seed, kDraftAcceptStream + idx, step),
        philox_uniform(t.seed, kDraftResidualStream + idx, step), &accepted);
    SampleResult r = results[j];
    if (r.token != token) {
      r.token = token;
      if (p.logprobs) r.logprob = token_logprob(raw, processed_.data(), vocab_, p, token);
    }
    emitted.push_back(std::move(r));
    if (!accepted) return j;
  }
  emitted.push_back(results[m]);  // every draft accepted: the bonus token, drawn from p_m
  return m;
}

void DraftModel::accepted(const Task& t, int32_t n_before, int32_t n_accepted) {
  if (cache_->state(t.id) == nullptr) return;
  const int32_t m = static_cast<int32_t>(t.drafts.size());
  // The draft fed the sequence and x_0 .. x_{m-2}; the accepted ones stay.
  cache_->truncate(t.id, n_before + std::min(n_accepted, m - 1));
}

void DraftModel::release(const Task& t, bool record_prefix) {
  q_.erase(t.id);
  const TaskCacheState* st = cache_->state(t.id);
  if (st == nullptr) return;
  if (record_prefix && t.request) {
    cache_->free(t.id, t.tokens(std::min(t.n_tokens(), st->kv_len)), /*record_prefix=*/true);
  } else {
    cache_->rollback(t.id);
  }
}

void DraftModel::check_integrity(const TaskCacheManager& target) const {
  cache_->check_integrity();
  for (const auto& [id, q] : q_)
    VELA_CHECK_T(InternalError, target.state(id) != nullptr, "draft model: task ", id,
                 " holds draft state but has no KV in the target cache (leaked)");
  // Every task the draft cache knows has its q_ entry (made together in propose()).
  VELA_CHECK_T(InternalError, cache_->stats().n_tasks <= static_cast<int64_t>(q_.size()),
               "draft model: ", cache_->stats().n_tasks, " draft KV tasks but ", q_.size(),
               " known tasks (leaked)");
}

DraftModel::Stats DraftModel::stats() const {
  Stats s = stats_;
  TaskCacheManager::Stats cs = cache_->stats();
  s.kv_pages_used = cs.pages_used;
  s.kv_pages_cached = cs.pages_cached;
  s.n_tasks = cs.n_tasks;
  return s;
}

}  // namespace vela
