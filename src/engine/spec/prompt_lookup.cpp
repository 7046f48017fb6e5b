// Prompt-lookup drafting: a backwards scan for the latest earlier occurrence of the suffix n-gram.
#include "engine/spec/prompt_lookup.h"

#include <algorithm>

namespace vela {

int32_t prompt_lookup_propose(const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& output, int32_t ngram_min,
                              int32_t ngram_max, int32_t k, std::vector<int32_t>& drafts) {
  drafts.clear();
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  const int64_t len = n_prompt + static_cast<int64_t>(output.size());
  auto at = [&](int64_t i) {
    return i < n_prompt ? prompt[static_cast<size_t>(i)]
                        : output[static_cast<size_t>(i - n_prompt)];
  };
  if (k <= 0) return 0;
  for (int64_t n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min; --n) {
    // Suffix seq[len - n, len); candidates start at i < len - n (an earlier occurrence).
    for (int64_t i = len - n - 1; i >= 0; --i) {
      int64_t j = 0;
      while (j < n && at(i + j) == at(len - n + j)) ++j;
      if (j < n) continue;
      for (int64_t d = 0; d < k; ++d) {
        int64_t src = i + n + d;  // < len + d: the sequence, then the drafts already made
        drafts.push_back(src < len ? at(src) : drafts[static_cast<size_t>(src - len)]);
      }
      return static_cast<int32_t>(drafts.size());
    }
  }
  return 0;
}

}  // namespace vela
