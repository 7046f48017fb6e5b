// What callers hand the engine and what they get back: a Request (prompt token ids + sampling
// parameters), StreamEvents while it runs, and a RequestResult with one Completion per sample.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"

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
};

// One increment of one sample (index < params.n) of a request.
struct StreamEvent {
  int32_t index = 0;
  std::vector<int32_t> tokens;       // new token ids
  std::string text;                  // new text (stop strings and EOS text held back / removed)
  std::vector<TokenLogprob> logprobs;  // one per new token when requested
  std::optional<FinishReason> finish;  // set on the last event of this sample
  std::string error;                   // when finish == kError
};

struct Completion {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  FinishReason finish_reason = FinishReason::kLength;
  std::string stop_reason;       // the matched stop string, when finished by one
  int32_t cached_tokens = 0;     // prompt tokens served from the prefix cache
  uint64_t policy_version = 0;   // weights version that finished this sample
  std::string error;
};

struct RequestResult {
  int32_t prompt_tokens = 0;
  std::vector<Completion> completions;  // params.n entries
};

}  // namespace vela
