// Engine construction (pool sizing, strategy choice), request validation and the facade methods.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>

#include "core/cuda/cuda_api.h"
#include "core/env.h"
#include "core/log.h"
#include "core/startup_log.h"
#include "engine/cache/contiguous_strategy.h"
#include "engine/cache/kv_sizing.h"
#include "engine/cache/kv_storage.h"
#include "engine/cache/paged_strategy.h"
#include "engine/cache/req_to_token_pool.h"
#include "engine/cache/task_cache_manager.h"
#include "engine/constrain/grammar_compiler.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/inference_workspace.h"
#include "engine/runtime/sampler.h"
#include "engine/spec/draft_model.h"
#include "ops/gemm_tuning.h"
#include "model/lora_adapter.h"
#include "ops/attention.h"

namespace vela {

Engine::Engine(Transformer model, std::unique_ptr<Tokenizer> tokenizer, const EngineConfig& cfg_in,
               std::unique_ptr<Transformer> draft)
    : cfg_(cfg_in),
      model_(std::make_unique<Transformer>(std::move(model))),
      model_config_(model_->config),
      dtype_(model_->dtype()),
      device_(model_->device()),
      tokenizer_(std::move(tokenizer)) {
  const ModelConfig& mc = model_config_;
  if (model_->lora_adapters) {
    lora_names_ = model_->lora_adapters->names;
    // Prefix-cache keys of adapter requests carry the slot above the token id (scheduler.cpp).
    VELA_CHECK(mc.vocab_size < (1 << 24) && lora_names_.size() < 120,
               "LoRA serving supports vocabularies below 2^24 and up to 119 adapters");
  }
  if (cfg_.max_ctx <= 0)
    cfg_.max_ctx = static_cast<int32_t>(std::min<int64_t>(mc.max_position_embeddings, 1 << 20));
  VELA_CHECK(cfg_.max_ctx <= mc.max_position_embeddings ||
                 mc.rope.scaling.type == ops::RopeScaling::Type::kDynamic,
             "max_ctx ", cfg_.max_ctx, " exceeds the model's max_position_embeddings ",
             mc.max_position_embeddings);
  // Checked here rather than per request: a model the CUDA kernels cannot run fails at start.
  VELA_CHECK_T(Unsupported, !device_.is_cuda() || ops::cuda_attention_head_dim_ok(mc.head_dim),
               "the CUDA attention kernels run head_dim a multiple of 8 up to ",
               ops::kMaxCudaHeadDim, ", but this model has head_dim ", mc.head_dim,
               " (serve it on the CPU, which takes any even head_dim)");
  VELA_CHECK(cfg_.kv_strategy == "paged" || cfg_.kv_strategy == "contiguous",
             "kv_strategy must be 'paged' or 'contiguous', got '", cfg_.kv_strategy, "'");
  VELA_CHECK(cfg_.max_seqs > 0, "max_seqs must be positive");
  VELA_CHECK(cfg_.max_tokens_per_step >= cfg_.max_seqs, "max_tokens_per_step (",
             cfg_.max_tokens_per_step, ") must be at least max_seqs (", cfg_.max_seqs,
             "): every decode row takes one token of each step");
  VELA_CHECK(cfg_.max_prefill_chunk >= 0, "max_prefill_chunk must be >= 0 (0 = no cap), got ",
             cfg_.max_prefill_chunk);
  VELA_CHECK(cfg_.max_prefills_per_step >= 0,
             "max_prefills_per_step must be >= 0 (0 = no cap), got ", cfg_.max_prefills_per_step);
  VELA_CHECK(cfg_.prefill_policy == "fcfs" || cfg_.prefill_policy == "prefix",
             "prefill_policy must be 'fcfs' or 'prefix', got '", cfg_.prefill_policy, "'");
  VELA_CHECK(cfg_.page_size > 0, "page_size must be positive");
  VELA_CHECK(cfg_.overlap_steps >= -1 && cfg_.overlap_steps <= 1,
             "overlap_steps must be -1 (auto), 0 (off) or 1 (on), got ", cfg_.overlap_steps);
  if (cfg_.overlap_steps < 0) {  // auto: on CUDA; VELA_OVERLAP_STEPS=0 / 1 decides (A/B runs)
    // Overlapped steps pay where the forward is asynchronous (CUDA); on the CPU it runs on the
    // loop thread, so launching the next step first would only delay this step's tokens.
    const int64_t env = env_int("VELA_OVERLAP_STEPS", -1, -1, 1);
    cfg_.overlap_steps = env >= 0 ? static_cast<int32_t>(env) : (device_.is_cuda() ? 1 : 0);
  }
  // Dynamic NTK rotary scales by the longest sequence of each forward (HF's rule), so a finished
  // task's row left in a step in flight would change the other rows' results: never overlapped.
  if (mc.rope.scaling.type == ops::RopeScaling::Type::kDynamic) cfg_.overlap_steps = 0;
  // Speculation drafts from the host's last token; LoRA rows carry per-row adapter slots that an
  // overlapped launch does not fill: neither ever overlaps.
  if (cfg_.speculative.enabled() || model_->lora_adapters) cfg_.overlap_steps = 0;
  cfg_.speculative.validate();
  int64_t full = static_cast<int64_t>(cfg_.max_seqs) * cfg_.max_ctx;
  KvSizingRequest kv_req;
  kv_req.kv_pages = cfg_.kv_pages;
  kv_req.kv_memory_fraction = cfg_.kv_memory_fraction;
  kv_req.n_kv_slots = cfg_.n_kv_slots;
  kv_req.page_size = cfg_.kv_strategy == "paged" ? cfg_.page_size : 1;
  kv_req.default_slots = std::min<int64_t>(full, std::max<int64_t>(cfg_.max_ctx, 1 << 16));
  kv_req.validate();
  if (cfg_.kv_strategy == "contiguous") {
    VELA_CHECK(cfg_.kv_pages == 0 && cfg_.kv_memory_fraction == 0 &&
                   (cfg_.n_kv_slots == 0 || cfg_.n_kv_slots == full),
               "the contiguous KV strategy needs exactly max_seqs * max_ctx slots (", full,
               "): leave the KV pool size unset");
    cfg_.n_kv_slots = full;
  } else {
    // A memory fraction applies to what is free now (weights loaded) less what the engine
    // allocates after the pool: the activation arena and the workspace (logits rows), plus slack
    // for the BLAS workspace and captured graphs on a GPU.
    int64_t available = 0;
    if (cfg_.kv_memory_fraction > 0) {
      const int64_t rows = cfg_.max_seqs + cfg_.max_tokens_per_step;
      const int64_t reserve =
          Executor::activation_bytes(mc, dtype_, cfg_.max_tokens_per_step, rows) +
          rows * mc.vocab_size * static_cast<int64_t>(sizeof(float)) +
          (device_.is_cuda() ? (int64_t{512} << 20) : 0);
      available = available_memory_bytes(device_, reserve);
    }
    cfg_.n_kv_slots = kv_pool_slots(kv_req, kv_bytes_per_token(mc, dtype_), available);
  }

  for (int32_t e : mc.eos_token_ids) eos_ids_.push_back(e);
  if (tokenizer_ && tokenizer_->eos_id() &&
      std::find(eos_ids_.begin(), eos_ids_.end(), *tokenizer_->eos_id()) == eos_ids_.end())
    eos_ids_.push_back(*tokenizer_->eos_id());

  Device dev = model_->device();
  const bool cuda = dev.is_cuda();
  // On CUDA one reserved slot takes the K/V of padding rows (decode batches padded to a bucket).
  {
    StartupPhase phase("KV pool allocation");
    storage_ = std::make_unique<KVStorage>(mc.n_layers, cfg_.n_kv_slots, mc.n_kv_heads, mc.head_dim,
                                           model_->dtype(), dev, cuda ? 1 : 0);
  }
  req_pool_ = std::make_unique<ReqToTokenPool>(cfg_.max_seqs, cfg_.max_ctx, dev);
  WorkspaceConfig wc;
  wc.max_seqs = cfg_.max_seqs;
  wc.max_tokens_per_step = cfg_.max_tokens_per_step;
  wc.vocab_size = mc.vocab_size;
  wc.device = dev;
  // Speculation: a row verifies its last token and up to k drafts (k + 1 logits rows) within the
  // step's token budget; forked n > 1 siblings add a sample row each.
  const int32_t n_logit_rows =
      cfg_.speculative.enabled()
          ? cfg_.max_seqs + std::min<int32_t>(cfg_.max_tokens_per_step,
                                              cfg_.max_seqs * cfg_.speculative.k)
          : cfg_.max_seqs;
  wc.max_logit_rows = n_logit_rows;
  if (cuda) {
    wc.n_heads = mc.n_heads;
    wc.head_dim = mc.head_dim;
  }
  ws_ = std::make_unique<InferenceWorkspace>(wc);
  std::unique_ptr<AllocationStrategy> strategy;
  if (cfg_.kv_strategy == "paged")
    strategy = std::make_unique<PagedStrategy>(cfg_.page_size);
  else
    strategy = std::make_unique<ContiguousStrategy>();
  cache_ = std::make_unique<TaskCacheManager>(std::move(strategy), *storage_, *req_pool_, *ws_);
  ExecutorOptions eo;
  eo.cuda_graphs = cfg_.cuda_graphs;
  eo.exact_graph_splits = cfg_.exact_graph_splits;
  // VELA_TIME_DEVICE=1 times a server's forwards too (GET /stats: engine.forward_ms).
  eo.time_device = cfg_.time_device || env_opted_in("VELA_TIME_DEVICE");
  eo.padding_slot = cuda ? storage_->padding_slot() : -1;
  executor_ = std::make_unique<Executor>(model_.get(), *ws_, eo);
  sampler_ = std::make_unique<Sampler>(mc.vocab_size, n_logit_rows, dev);
  VELA_CHECK(!draft || cfg_.speculative.uses_draft_model(),
             "a draft model was given but the speculative config is '", cfg_.speculative.describe(),
             "' (use draft=DIR)");
  if (cfg_.speculative.uses_draft_model()) {
    std::unique_ptr<Tokenizer> draft_tokenizer;
    if (!draft) {
      const std::string& ddir = cfg_.speculative.draft_dir;
      VELA_CHECK(!ddir.empty(), "--speculative draft: no draft model directory given");
      draft = std::make_unique<Transformer>(Transformer::load(ddir, dtype_, device_));
      if (std::filesystem::exists(std::filesystem::path(ddir) / "tokenizer.json"))
        draft_tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_file(ddir));
    }
    DraftModel::check_compatible(mc, tokenizer_.get(), *draft, draft_tokenizer.get(), cfg_.max_ctx,
                                 device_, dtype_);
    draft_ = std::make_unique<DraftModel>(std::move(*draft), cfg_, *executor_);
  }
  scheduler_ =
      std::make_unique<Scheduler>(cfg_, *cache_, *executor_, *sampler_, *ws_, tokenizer_.get(),
                                  eos_ids_, draft_.get());
  // Setup ran on this thread's stream; the loop uses the engine's stream: finish setup first.
  if (cuda) cuda::synchronize(dev.index);
  if (executor_->graphs_enabled()) {
    KVCacheView cache;
    cache.k_cache = storage_->k;
    cache.v_cache = storage_->v;
    cache.req_to_token = req_pool_->table();
    const int32_t len = std::min<int32_t>(cfg_.max_ctx, 1024);
    if (cfg_.capture_graphs_at_start) {
      StartupPhase phase("decode graph capture");
      ops::GemmTuningScope tune_gemms;  // VELA_GEMM_TUNE=1: decode GEMM plans timed (gemm_tuning.h)
      double s = executor_->capture_decode_graphs(cache, len);
      VELA_LOG_INFO("[engine] captured ", executor_->n_graphs(), " decode CUDA graphs in ",
                    static_cast<int>(s * 1000), " ms");
    } else {
      // The scheduler loop captures them one at a time while idle (Scheduler::run), so the first
      // requests do not wait for them; a step whose graph is still missing captures it itself.
      executor_->queue_decode_graphs(cache, len);
    }
  }
  VELA_LOG_INFO("[engine] ", cfg_.kv_strategy, " KV: ", cfg_.n_kv_slots, " slots (",
                storage_->k.nbytes() * 2 / (1 << 20), " MiB), max_seqs ", cfg_.max_seqs,
                ", max_ctx ", cfg_.max_ctx, ", step budget ", cfg_.max_tokens_per_step,
                " tokens (prefill chunk cap ", cfg_.max_prefill_chunk, ", ", cfg_.prefill_policy,
                ")", ", speculative ", cfg_.speculative.describe());
  scheduler_->refresh_stats();  // the first snapshot (graphs captured, pages) before any step
  loop_ = std::thread([this] { scheduler_->run(); });
}

std::string Engine::check_integrity() {
  StepGate::Hold between_steps = scheduler_->gate().enter_outside();
  try {
    cache_->check_integrity();
    if (draft_) draft_->check_integrity(*cache_);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

size_t Engine::n_cuda_graphs() const { return static_cast<size_t>(stats().n_cuda_graphs); }
double Engine::graph_capture_seconds() const { return stats().graph_capture_s; }

Engine::~Engine() {
  scheduler_->request_stop();
  if (loop_.joinable()) loop_.join();
}

std::unique_ptr<Engine> Engine::load(const std::string& dir, const EngineConfig& cfg, DType dtype,
                                     Device device,
                                     const std::vector<std::pair<std::string, std::string>>& lora) {
  // The tokenizer loads on its own thread while the weights stream to the device.
  std::future<std::unique_ptr<Tokenizer>> tok_future;
  if (std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json"))
    tok_future = std::async(std::launch::async, [dir] {
      StartupPhase phase("tokenizer load");
      return std::make_unique<Tokenizer>(Tokenizer::from_file(dir));
    });
  Transformer m = Transformer::load(dir, dtype, device);
  if (!lora.empty()) attach_lora_adapters(m, lora);
  std::unique_ptr<Tokenizer> tok = tok_future.valid() ? tok_future.get() : nullptr;
  StartupPhase phase("engine setup (KV pool, workspace, loop)");
  return std::make_unique<Engine>(std::move(m), std::move(tok), cfg);
}

RequestHandlePtr Engine::submit(Request request) {
  const ModelConfig& mc = model_config_;
  request.params.validate();
  request.params.validate_token_ids(mc.vocab_size);
  VELA_CHECK(!request.prompt.empty(), "the prompt is empty");
  for (int32_t id : request.prompt)
    VELA_CHECK(id >= 0 && id < mc.vocab_size, "prompt token id ", id,
               " is outside the vocabulary [0, ", mc.vocab_size, ")");
  int64_t need = static_cast<int64_t>(request.prompt.size()) + request.params.max_tokens;
  VELA_CHECK(need <= cfg_.max_ctx, "prompt (", request.prompt.size(), " tokens) + max_tokens (",
             request.params.max_tokens, ") exceeds the context limit of ", cfg_.max_ctx, " tokens");
  VELA_CHECK(need <= cfg_.n_kv_slots, "prompt + max_tokens (", need,
             ") exceeds the whole KV pool (", cfg_.n_kv_slots, " tokens)");
  VELA_CHECK(request.params.n <= cfg_.max_seqs, "n = ", request.params.n,
             " exceeds the engine's max_seqs (", cfg_.max_seqs, ")");
  request.lora_slot = -1;
  if (!request.lora.empty()) {
    for (size_t i = 0; i < lora_names_.size(); ++i)
      if (lora_names_[i] == request.lora) request.lora_slot = static_cast<int32_t>(i);
    VELA_CHECK(request.lora_slot >= 0, "unknown LoRA adapter '", request.lora,
               "' (loaded: ", json(lora_names()).dump(), ")");
  }
  VELA_CHECK(request.params.stop.empty() || tokenizer_ != nullptr,
             "stop strings need a tokenizer (the model directory has no tokenizer.json)");
  if (request.params.constraint.active() && !request.grammar)
    request.grammar = compile_constraint(request.params.constraint);
  auto handle = std::make_shared<RequestHandle>(next_request_id_.fetch_add(1), request.params.n,
                                                static_cast<int32_t>(request.prompt.size()));
  auto req = std::make_shared<const Request>(std::move(request));
  if (!scheduler_->submit(req, handle)) return nullptr;
  return handle;
}

std::shared_ptr<const constrain::CompiledGrammar> Engine::compile_constraint(const Constraint& c) {
  VELA_CHECK(c.active(), "compile_constraint: no constraint given");
  constrain::GrammarCompiler* compiler;
  {
    std::lock_guard<std::mutex> lock(grammar_mu_);
    if (!grammar_compiler_) {
      VELA_CHECK(tokenizer_ != nullptr, "constrained decoding (", constraint_kind_name(c.kind),
                 ") needs a tokenizer (the model directory has no tokenizer.json)");
      grammar_compiler_ = std::make_unique<constrain::GrammarCompiler>(
          constrain::TokenVocab::from_tokenizer(*tokenizer_, model_config_.vocab_size, eos_ids_));
    }
    compiler = grammar_compiler_.get();
  }
  return compiler->compile(c);
}

std::vector<RequestResult> Engine::generate(const std::vector<Request>& requests) {
  std::vector<RequestHandlePtr> handles;
  for (const Request& r : requests) {
    RequestHandlePtr h = submit(r);
    VELA_CHECK_T(OutOfMemory, h != nullptr, "the engine's waiting queue is full");
    handles.push_back(h);
  }
  std::vector<RequestResult> out;
  for (auto& h : handles) out.push_back(h->wait());
  return out;
}

std::vector<std::vector<RolloutSample>> Engine::run_batch(
    const std::vector<std::vector<int32_t>>& prompts, SamplingParams params) {
  params.logprobs = true;  // the behaviour log-probabilities
  if (!params.on_weight_update) params.on_weight_update = WeightUpdatePolicy::kFinishOld;
  // All prompts enter at one step boundary (submitted under the gate), each with its own seed
  // (params.seed + its index, when a seed is given): the batch, and so the floats, are the same
  // from run to run.
  std::vector<RequestHandlePtr> handles;
  {
    StepGate::Hold together = pause();
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request r;
      r.prompt = prompts[i];
      r.params = params;
      if (params.seed) r.params.seed = *params.seed + i;
      RequestHandlePtr h = submit(std::move(r));
      VELA_CHECK_T(OutOfMemory, h != nullptr, "the engine's waiting queue is full (",
                   prompts.size(), " rollout prompts; raise max_waiting)");
      handles.push_back(std::move(h));
    }
  }
  std::vector<RequestResult> results;
  for (auto& h : handles) results.push_back(h->wait());
  std::vector<std::vector<RolloutSample>> out;
  for (const RequestResult& r : results) {
    std::vector<RolloutSample> samples;
    for (const Completion& c : r.completions) {
      VELA_CHECK(c.error.empty(), "rollout failed in the engine: ", c.error);
      RolloutSample s;
      s.tokens = c.tokens;
      for (const TokenLogprob& lp : c.logprobs) s.logprobs.push_back(lp.logprob);
      s.text = c.text;
      s.finish_reason = c.finish_reason;
      s.policy_version = c.policy_version;
      s.versions = c.versions;
      s.mixed_versions = c.mixed_versions;
      samples.push_back(std::move(s));
    }
    out.push_back(std::move(samples));
  }
  return out;
}

uint64_t Engine::update_weights(Transformer new_model) {
  const ModelConfig& a = model_config_;
  const ModelConfig& b = new_model.config;
  VELA_CHECK(a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
                 a.n_layers == b.n_layers && a.n_heads == b.n_heads &&
                 a.n_kv_heads == b.n_kv_heads && a.head_dim == b.head_dim &&
                 a.intermediate_size == b.intermediate_size && a.n_experts == b.n_experts &&
                 a.moe_intermediate_size == b.moe_intermediate_size,
             "update_weights: the new model's architecture differs from the served one");
  VELA_CHECK(new_model.dtype() == dtype_ && new_model.device() == device_,
             "update_weights: the new weights must have the served dtype and device");
  std::lock_guard<std::mutex> serial(update_mu_);
  // CUDA: whatever the caller queued on its stream (writing these weights) comes before the
  // engine stream's next forward: an event, waited for by the loop on its own stream.
  std::unique_ptr<cuda::StreamEvent> ready;
  if (device_.is_cuda()) {
    ready = std::make_unique<cuda::StreamEvent>(device_.index);
    ready->record();
  }
  auto next = std::make_unique<Transformer>(std::move(new_model));
  // At the next step boundary; kFinishOld samples in flight finish first (none start meanwhile).
  scheduler_->hold_finish_old(true);
  int64_t steps_at_call = 0;
  StepGate::Hold between_steps =
      scheduler_->gate().enter_outside([&] { steps_at_call = scheduler_->stats().steps; });
  while (scheduler_->finish_old_in_flight()) {
    uint64_t seen = scheduler_->loop_iterations();
    between_steps.release();
    scheduler_->wait_loop_iteration(seen, 100);
    between_steps = scheduler_->gate().enter_outside();
  }
  executor_->set_model(next.get());
  model_ = std::move(next);
  cache_->invalidate_prefix_cache();
  uint64_t v = policy_version_.fetch_add(1) + 1;
  scheduler_->apply_weight_update(v, std::move(ready), steps_at_call);
  scheduler_->hold_finish_old(false);
  scheduler_->refresh_stats();
  VELA_LOG_INFO("[engine] weights updated, policy version ", v);
  return v;
}

}  // namespace vela
