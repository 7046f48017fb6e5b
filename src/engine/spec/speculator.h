// Speculator: the scheduler's drafting policy and counters. Each decode step a speculating sample
// gets up to k draft tokens (prompt lookup over its own tokens); the scheduler feeds its last token
// and the drafts as one ragged-prefill item (k + 1 logits rows), samples every row, keeps the
// accepted prefix (rejection.h) and rolls the KV of the rejected drafts back
// (TaskCacheManager::truncate). Owned by the scheduler loop thread; not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/spec/spec_config.h"

namespace vela {

struct SpeculativeStats {
  int64_t rows = 0;      // verification rows run (one sample, one target step, >= 1 draft)
  int64_t drafted = 0;   // draft tokens verified
  int64_t accepted = 0;  // ... accepted
  int64_t emitted = 0;   // tokens those rows emitted (accepted + correction/bonus, before stops)
  int64_t draft_forwards = 0;  // draft-model forwards run (catch-up and one-token steps)
  double draft_seconds = 0;    // wall time spent drafting with the draft model
  double acceptance_rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0; }
  double tokens_per_step() const { return rows ? static_cast<double>(emitted) / rows : 0; }
};

class Speculator {
 public:
  explicit Speculator(const SpeculativeConfig& cfg);

  // Whether a sample with these params speculates (the server-wide config and the request's
  // opt-out).
  bool wants(const SamplingParams& p) const { return cfg_.enabled() && p.speculative; }
  // Drafts at most min(k, max_drafts) tokens following prompt + output into `drafts` (cleared);
  // returns how many (0: decode normally).
  int32_t propose(const std::vector<int32_t>& prompt, const std::vector<int32_t>& output,
                  int32_t max_drafts, std::vector<int32_t>& drafts) const;
  // Counts one verified row.
  void record(int32_t n_drafted, int32_t n_accepted, int32_t n_emitted);

  const SpeculativeConfig& config() const { return cfg_; }
  const SpeculativeStats& stats() const { return stats_; }

 private:
  SpeculativeConfig cfg_;
  SpeculativeStats stats_;
};

}  // namespace vela
