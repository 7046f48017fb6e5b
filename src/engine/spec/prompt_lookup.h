// Prompt-lookup drafting: the sequence's own tokens as the draft model. The last n tokens
// (n = ngram_max down to ngram_min) are searched for earlier in prompt + output; the most recent
// earlier match proposes the tokens that followed it. Where the continuation runs into the end of
// the sequence it goes on with the tokens drafted so far, so a loop of any period drafts k tokens.
// Deterministic: the draft distribution is a point mass (see rejection.h).
#pragma once

#include <cstdint>
#include <vector>

namespace vela {

// Fills `drafts` with up to k proposed tokens (cleared first; empty when nothing matches) and
// returns their count. Costs O((prompt + output) * ngram_max) compares at most.
int32_t prompt_lookup_propose(const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& output, int32_t ngram_min,
                              int32_t ngram_max, int32_t k, std::vector<int32_t>& drafts);

}  // namespace vela
