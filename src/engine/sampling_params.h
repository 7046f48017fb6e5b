// SamplingParams: the per-request decoding knobs (OpenAI request semantics) and their validation.
// A plain value type: the engine copies it into each request; the Sampler and StopChecker only
// read it. validate() and from_json() throw InvalidArgument naming the field and its allowed range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "engine/constrain/constraint.h"

namespace vela {

// What a sample in flight does when the engine's weights are updated (each update bumps the
// policy version; see Engine::update_weights and Completion::versions).
enum class WeightUpdatePolicy {
  kMixed,      // "mixed": go on with the new weights; Completion::versions marks where it changed
  kRestart,    // "restart": drop what it generated and start again from the prompt (the stream
               // gets an event with restarted = true); one version per completion
  kFinishOld,  // "finish": the update waits until the sample finished on its first weights
};
const char* weight_update_policy_name(WeightUpdatePolicy p);

// What SampleResult::logprob and top_logprobs report.
enum class LogprobsMode {
  kRaw,       // "raw": log_softmax of the model's logits before any processing (OpenAI's meaning,
              // vLLM's default logprobs_mode "raw_logprobs")
  kTempered,  // "tempered": log_softmax((logits + penalties + logit_bias) / T), the distribution
              // the token was drawn from before top-k / top-p / min-p truncation; greedy rows use
              // T = 1. RL behaviour log-probs: a trainer computing log_softmax(logits / T) of the
              // same weights gets the same numbers (docs/rl.md says why truncation is left out)
};
const char* logprobs_mode_name(LogprobsMode m);

struct SamplingParams {
  static constexpr int32_t kMaxTopLogprobs = 20;
  // Temperatures below this sample greedily (as vLLM's _SAMPLING_EPS): 1/T would overflow anyway.
  static constexpr float kGreedyTemperature = 1e-5f;

  float temperature = 1.0f;  // [0, inf); 0 = greedy (argmax, ties to the lower id)
  float top_p = 1.0f;        // (0, 1]; keep the smallest most-probable set with mass >= top_p
  int32_t top_k = 0;         // 0 or -1 = off; ties with the k-th value are kept (as HF / vLLM)
  float min_p = 0.0f;        // [0, 1]; drop tokens with p < min_p * p_max
  // OpenAI semantics over the generated tokens: logit -= presence * [count > 0] + frequency *
  // count.
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;  // [-2, 2]
  // HF / vLLM semantics over prompt + generated tokens: positive logits divided, others
  // multiplied.
  float repetition_penalty = 1.0f;                    // (0, inf)
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to the logit; -inf bans)
  std::optional<uint64_t> seed;                       // per-request reproducibility
  int32_t max_tokens = 16;                            // >= 0
  int32_t n = 1;                                      // >= 1 parallel samples
  std::vector<std::string> stop;        // stop strings, non-empty (the match is not emitted)
  std::vector<int32_t> stop_token_ids;  // besides the model's EOS (not affected by ignore_eos)
  bool ignore_eos = false;
  bool logprobs = false;
  int32_t top_logprobs = 0;  // 0..20; > 0 requires logprobs
  // Constrained decoding: the output must match this (JSON Schema, JSON object, regex, EBNF,
  // choice). The engine compiles it at submit (InvalidArgument naming an unsupported construct);
  // tokens the grammar does not allow are masked before penalties / temperature / top-k / top-p,
  // and EOS is allowed only where the grammar may end. Logprobs are those of the masked row.
  Constraint constraint;
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;
  // Unset: kMixed for submit() / generate(), kFinishOld for Engine::run_batch (rollouts).
  std::optional<WeightUpdatePolicy> on_weight_update;
  // Speculative decoding (when the engine has it on, EngineConfig::speculative): false opts this
  // request out. The output distribution is the same either way.
  bool speculative = true;
  WeightUpdatePolicy weight_update_policy() const {
    return on_weight_update.value_or(WeightUpdatePolicy::kMixed);
  }

  bool is_greedy() const { return temperature < kGreedyTemperature; }
  bool has_penalties() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f;
  }

  // Throws InvalidArgument with a message naming the field and the allowed range.
  void validate() const;
  // Checks the token ids (logit_bias, stop_token_ids) against the model's vocabulary size.
  void validate_token_ids(int64_t vocab_size) const;

  // Keys as in OpenAI requests: temperature, top_p, top_k, min_p, presence_penalty,
  // frequency_penalty, repetition_penalty, logit_bias ({"id": bias}), seed, max_tokens (or
  // max_completion_tokens), n, stop (string or list), stop_token_ids, ignore_eos, logprobs (bool,
  // or an int for completions-style: logprobs = true, top_logprobs = the int), top_logprobs. Null
  // values mean "default"; extensions: on_weight_update, logprobs_mode ("raw" | "tempered"),
  // speculative (bool); unknown keys are ignored (they belong to the request, not to sampling).
  // Constraints (at most one): response_format ({"type": "text" | "json_object" | "json_schema",
  // "json_schema": {"schema": ...}}), guided_json (a schema object or its JSON text),
  // guided_regex, guided_grammar (GBNF), guided_choice (a list of strings).
  // Parses, then validate()s; throws InvalidArgument naming the key on a wrong type or value.
  static SamplingParams from_json(const json& j);
  json to_json() const;
};

}  // namespace vela
