// Engine: the public facade of inference — submit / generate / cancel / stats / run_batch /
// update_weights — over one model, its KV cache and a scheduler loop thread.
//
// Thread-safety: every public method may be called from any thread. submit() validates the request
// (InvalidArgument naming the problem) and returns nullptr when the waiting queue is full (a
// capacity outcome, e.g. HTTP 429). update_weights waits for the step in flight, swaps the
// weights, bumps the monotonic policy version and drops the prefix cache (its KV belongs to the
// old weights); each Completion carries the version that finished it.
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
class DeviceSampler;

// One rollout sample for RL: tokens with the behaviour policy's log-probabilities.
struct RolloutSample {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // log p(token) under the weights that generated it
  std::string text;
  FinishReason finish_reason = FinishReason::kLength;
  uint64_t policy_version = 0;
};

class Engine {
 public:
  Engine(Transformer model, std::unique_ptr<Tokenizer> tokenizer, const EngineConfig& cfg = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Loads `<dir>` (config.json, safetensors, and tokenizer.json when present).
  static std::unique_ptr<Engine> load(const std::string& dir, const EngineConfig& cfg = {},
                                      DType dtype = DType::kF32, Device device = Device::cpu());

  RequestHandlePtr submit(Request request);
  // Blocking: submits all, waits for all, results in input order.
  std::vector<RequestResult> generate(const std::vector<Request>& requests);
  void cancel(const RequestHandlePtr& handle) { handle->cancel(); }
  // Holds the scheduler between steps while the returned lock lives: requests submitted meanwhile
  // enter together at the next step (an RL trainer batching its rollouts; deterministic tests).
  std::unique_lock<std::mutex> pause() { return std::unique_lock<std::mutex>(scheduler_->step_mutex()); }
  EngineStats stats() const { return scheduler_->stats(); }

  // Synchronous rollouts: n = params.n samples per prompt, behaviour logprobs always recorded.
  std::vector<std::vector<RolloutSample>> run_batch(const std::vector<std::vector<int32_t>>& prompts,
                                                    SamplingParams params);
  uint64_t update_weights(Transformer new_model);
  uint64_t policy_version() const { return policy_version_; }

  const ModelConfig& model_config() const { return model_->config; }
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

 private:
  EngineConfig cfg_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> eos_ids_;
  std::unique_ptr<KVStorage> storage_;
  std::unique_ptr<ReqToTokenPool> req_pool_;
  std::unique_ptr<InferenceWorkspace> ws_;
  std::unique_ptr<TaskCacheManager> cache_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<DeviceSampler> device_sampler_;  // CUDA: sampling on the logits' device
  std::unique_ptr<Scheduler> scheduler_;
  std::thread loop_;
  std::atomic<uint64_t> next_request_id_{1};
  std::atomic<uint64_t> policy_version_{0};
  std::mutex update_mu_;
};

}  // namespace vela
