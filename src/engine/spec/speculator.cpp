// Speculator: draft proposal by prompt lookup and the acceptance counters.
#include "engine/spec/speculator.h"

#include <algorithm>

#include "engine/spec/prompt_lookup.h"

namespace vela {

Speculator::Speculator(const SpeculativeConfig& cfg) : cfg_(cfg) { cfg_.validate(); }

int32_t Speculator::propose(const std::vector<int32_t>& prompt, const std::vector<int32_t>& output,
                            int32_t max_drafts, std::vector<int32_t>& drafts) const {
  drafts.clear();
  const int32_t k = std::min(cfg_.k, max_drafts);
  if (k <= 0) return 0;
  return prompt_lookup_propose(prompt, output, cfg_.ngram_min, cfg_.ngram_max, k, drafts);
}

void Speculator::record(int32_t n_drafted, int32_t n_accepted, int32_t n_emitted) {
  ++stats_.rows;
  stats_.drafted += n_drafted;
  stats_.accepted += n_accepted;
  stats_.emitted += n_emitted;
}

}  // namespace vela
