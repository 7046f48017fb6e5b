// Stop conditions of one generated sequence. StopChecker matches stop strings on the detokenized
// text across token boundaries, holding back any suffix that could still become a stop string;
// StopCondition adds the token-level rules (EOS, stop_token_ids, max_tokens) in vLLM's order.
// Both are per-sample state owned by the scheduler thread (not thread-safe); neither throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/sampling_params.h"

namespace vela {

class StopChecker {
 public:
  // Empty strings are ignored (validate() rejects them in requests).
  explicit StopChecker(std::vector<std::string> stop_strings);

  // Feeds the next text increment and returns the text safe to emit now. Held back: the longest
  // suffix that is a proper prefix of a stop string, and an incomplete trailing UTF-8 sequence.
  // When a stop string completes, stopped() turns true and the returned text ends right before it;
  // if several complete in this increment, the one that ends first wins (ties: the one that starts
  // first), which is what a character-by-character stream would have seen. Later feeds return "".
  std::string push(std::string_view text);
  // At the end (EOS / length / cancel): releases the held-back text ("" once stopped).
  std::string flush();

  bool stopped() const { return stopped_; }
  bool has_stop_strings() const { return !stops_.empty(); }  // else push() can never stop
  const std::string& matched() const { return matched_; }  // the stop string found, or ""
  // Bytes currently held back.
  size_t n_pending() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  size_t max_stop_bytes_ = 0;
  std::string pending_;
  std::string matched_;
  bool stopped_ = false;
};

// What the scheduler does with one generated token.
struct StopDecision {
  std::string text;                    // text to emit for this token (possibly "")
  std::optional<FinishReason> finish;  // set when the sample ends with this token
  std::string stop_reason;             // the matched stop string, when one ended the sample
};

class StopCondition {
 public:
  // `eos_token_ids`: the model's end-of-sequence ids (generation_config may list several).
  StopCondition(const SamplingParams& params, std::vector<int32_t> eos_token_ids);

  // Called once per generated token, after it was appended; `n_generated` counts it. `text` is
  // the token's text increment (from the streaming decoder). Order: EOS (unless ignore_eos) ->
  // stop_token_ids -> stop strings -> max_tokens. A stop token's own text is not emitted; on EOS,
  // stop token and length the held-back text is released.
  StopDecision step(int32_t token, int32_t n_generated, std::string_view text);
  // The sample ends for an outside reason (cancel): releases the held-back text.
  std::string finish();

  bool finished() const { return finished_; }
  bool is_stop_token(int32_t token) const;

 private:
  std::vector<int32_t> eos_token_ids_;
  std::vector<int32_t> stop_token_ids_;
  bool ignore_eos_;
  int32_t max_tokens_;
  StopChecker strings_;
  bool finished_ = false;
};

}  // namespace vela
