// What callers hand the engine and what they get back: a Request (prompt token ids + sampling
// parameters), StreamEvents while it runs, and a RequestResult with one Completion per sample.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"

namespace vela::constrain {
class CompiledGrammar;
}

namespace vela {

enum class FinishReason { kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // top_logprobs alternatives, best first
};

struct Request {
  std::vector<int32_t> prompt;  // token ids (the server renders chat templates and tokenizes)
  SamplingParams params;
  std::string lora{};      // LoRA adapter name (Engine::lora_names()); "" = the base model
  int32_t lora_slot = -1;  // set by Engine::submit from `lora` (callers leave it)
  // params.constraint compiled for the model's vocabulary: set by Engine::submit (callers leave
  // it empty, or pass one from Engine::compile_constraint).
  std::shared_ptr<const constrain::CompiledGrammar> grammar{};
};

// One increment of one sample (index < params.n) of a request.
struct StreamEvent {
  int32_t index = 0;
  std::vector<int32_t> tokens;         // new token ids
  std::string text;                    // new text (stop strings and EOS text held back / removed)
  std::vector<TokenLogprob> logprobs;  // one per new token when requested
  std::optional<FinishReason> finish;  // set on the last event of this sample
  std::string error;                   // when finish == kError
  // WeightUpdatePolicy::kRestart: a weight update discarded everything this sample streamed so
  // far; it starts again from the prompt (this event carries no tokens).
  bool restarted = false;
};

// Tokens [first_token, next span's first_token) of a completion were sampled from logits of the
// weights with this policy version. stale_kv: over KV that older weights wrote in part (kMixed
// across an update: every later span, and the first when part of the prompt's KV was written
// before an update, a prompt prefilled in chunks or a cached prefix); a span without it holds
// exactly what its version's weights give for prompt + earlier tokens.
struct VersionSpan {
  int32_t first_token = 0;
  uint64_t version = 0;
  bool stale_kv = false;
};

struct Completion {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  FinishReason finish_reason = FinishReason::kLength;
  std::string stop_reason;    // the matched stop string, when finished by one
  int32_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  // The policy version of the weights that sampled the tokens: every token's unless
  // mixed_versions, else the last one's. `versions` gives it per token range (one span unless
  // the sample ran across a weight update under WeightUpdatePolicy::kMixed). A sample that
  // sampled nothing carries the version current when it finished, and no spans.
  uint64_t policy_version = 0;
  std::vector<VersionSpan> versions;
  // Tokens from more than one version, or tokens sampled on KV that older weights wrote.
  bool mixed_versions = false;
  std::string error;
};

struct RequestResult {
  int32_t prompt_tokens = 0;
  std::vector<Completion> completions;  // params.n entries
};

}  // namespace vela
