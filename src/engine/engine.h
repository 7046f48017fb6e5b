// Engine: the public facade of inference — submit / generate / cancel / stats / run_batch /
// update_weights — over one model, its KV cache and a scheduler loop thread.
//
// Thread-safety, by design: every public method may be called from any thread at any time.
//  - What callers read without a lock never changes after construction: the model's
//    architecture (model_config(), a copy; update_weights only accepts the same architecture),
//    the config, the tokenizer, the EOS ids.
//  - The model, the KV cache, the executor and the sampler belong to the scheduler's loop
//    thread. Anyone else touches them only through the StepGate, between two steps
//    (update_weights, pause(), check_integrity()); the gate is fair, so such a caller waits for
//    at most the step in flight (two with overlapped steps, EngineConfig::overlap_steps).
//  - stats() (and n_cuda_graphs(), graph_capture_seconds()) read a snapshot the loop publishes.
// submit() validates the request (InvalidArgument naming the problem) and returns nullptr when
// the waiting queue is full (a capacity outcome, e.g. HTTP 429).
//
// Policy versions: update_weights swaps the weights at the next step boundary, bumps the
// monotonic version and drops the prefix cache (its KV belongs to the old weights). Each
// Completion records the version of every generated token (Completion::versions); what a sample
// in flight does across an update is its SamplingParams::on_weight_update (mixed and marked,
// restarted, or finished on the old weights first).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_config.h"
#include "engine/request.h"
#include "engine/request_handle.h"
#include "engine/scheduler.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace vela {

class KVStorage;
class ReqToTokenPool;
class InferenceWorkspace;
class TaskCacheManager;
class Executor;
class Sampler;
class DraftModel;
namespace constrain {
class GrammarCompiler;
}

// One rollout sample for RL: tokens with the behaviour policy's log-probabilities.
struct RolloutSample {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // log p(token) under the weights that generated it
  std::string text;
  FinishReason finish_reason = FinishReason::kLength;
  uint64_t policy_version = 0;        // of every token unless mixed_versions
  std::vector<VersionSpan> versions;  // per token range (Completion::versions)
  bool mixed_versions = false;
};

class Engine {
 public:
  // With cfg.speculative a draft model (draft=DIR), `draft` is that model when given (tests, or a
  // caller that built it); else it is loaded from cfg.speculative.draft_dir with the target's dtype
  // and device. Throws InvalidArgument when it does not share the target's vocabulary.
  Engine(Transformer model, std::unique_ptr<Tokenizer> tokenizer, const EngineConfig& cfg = {},
         std::unique_ptr<Transformer> draft = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Loads `<dir>` (config.json, safetensors, and tokenizer.json when present).
  // `lora`: (name, dir) PEFT adapters served next to the base (model/lora_adapter.h).
  static std::unique_ptr<Engine> load(
      const std::string& dir, const EngineConfig& cfg = {}, DType dtype = DType::kF32,
      Device device = Device::cpu(),
      const std::vector<std::pair<std::string, std::string>>& lora = {});

  RequestHandlePtr submit(Request request);
  // Blocking: submits all, waits for all, results in input order.
  std::vector<RequestResult> generate(const std::vector<Request>& requests);
  void cancel(const RequestHandlePtr& handle) { handle->cancel(); }
  // Holds the scheduler between steps while the returned hold lives (taken at the next step
  // boundary): requests submitted meanwhile enter together at the next step (an RL trainer
  // batching its rollouts; deterministic tests). Do not call update_weights() while holding it.
  StepGate::Hold pause() { return scheduler_->gate().enter_outside(); }
  EngineStats stats() const { return scheduler_->stats(); }

  // Synchronous rollouts: n = params.n samples per prompt, behaviour logprobs always recorded;
  // all prompts enter at one step boundary, prompt i seeded params.seed + i (when set), so a
  // batch is reproducible bit for bit (on CUDA with overlapped steps: as long as no other thread
  // enters the step gate meanwhile, since a caller there changes which steps overlap, and so the
  // batch buckets of a few steps). OutOfMemory when the waiting queue cannot take them all.
  // A mixed-version sample is never returned silently: an unset params.on_weight_update means
  // kFinishOld here (kRestart restarts instead; kMixed samples come back marked).
  std::vector<std::vector<RolloutSample>> run_batch(
      const std::vector<std::vector<int32_t>>& prompts, SamplingParams params);
  // Serves `new_model` from the next step boundary (after kFinishOld samples in flight finished;
  // new ones wait meanwhile) and returns the new policy version. The architecture, dtype and
  // device must match (InvalidArgument). `new_model` may share its tensors with the served model
  // or with a trainer (a by-value copy of a Transformer shares them): then nothing is copied and
  // the CUDA graphs are kept; whoever writes such shared tensors in place must do it while no
  // generation is in flight (or inside pause()), then call update_weights to publish them. On
  // CUDA, work queued on the calling thread's current stream before the call (writing the
  // weights) is ordered before the engine's next forward, without a device-wide sync.
  uint64_t update_weights(Transformer new_model);
  uint64_t policy_version() const { return policy_version_; }

  const ModelConfig& model_config() const { return model_config_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const EngineConfig& config() const { return cfg_; }
  const KVStorage& kv_storage() const { return *storage_; }  // for tests and debugging
  // Runs the KV cache's check_integrity() between steps (pages, ref counts, radix, rows):
  // empty when it holds, else what is broken.
  std::string check_integrity();
  // CUDA graphs captured so far and the seconds their capture took (0 on the CPU).
  size_t n_cuda_graphs() const;
  double graph_capture_seconds() const;
  // Request-level limits (for servers): the longest prompt + max_tokens accepted.
  int32_t max_context() const { return cfg_.max_ctx; }
  // Every id that ends generation unless ignore_eos (model config + tokenizer).
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // The LoRA adapters a Request::lora may name (model/lora_adapter.h), by slot; empty when none.
  const std::vector<std::string>& lora_names() const { return lora_names_; }
  // Compiles a constraint for this model's vocabulary (cached by its text; the vocabulary's byte
  // strings are built on first use). submit() calls it for params.constraint; servers may call it
  // first to reject a bad schema early. Throws InvalidArgument naming the unsupported construct,
  // or when the model has no tokenizer.
  std::shared_ptr<const constrain::CompiledGrammar> compile_constraint(const Constraint& c);

 private:
  EngineConfig cfg_;
  std::unique_ptr<Transformer> model_;  // loop thread, or between steps (StepGate)
  const ModelConfig model_config_;      // immutable copies: read by any thread without a lock
  const DType dtype_;
  const Device device_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> eos_ids_;
  std::vector<std::string> lora_names_;  // immutable after construction
  std::unique_ptr<KVStorage> storage_;
  std::unique_ptr<ReqToTokenPool> req_pool_;
  std::unique_ptr<InferenceWorkspace> ws_;
  std::unique_ptr<TaskCacheManager> cache_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Sampler> sampler_;  // on the model's device
  std::unique_ptr<DraftModel> draft_;  // draft-model speculation (loop thread)
  std::unique_ptr<Scheduler> scheduler_;
  std::mutex grammar_mu_;  // creates grammar_compiler_ once
  std::unique_ptr<constrain::GrammarCompiler> grammar_compiler_;
  std::thread loop_;
  std::atomic<uint64_t> next_request_id_{1};
  std::atomic<uint64_t> policy_version_{0};
  std::mutex update_mu_;  // one update_weights at a time
};

}  // namespace vela
