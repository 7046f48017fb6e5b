// CPU twin of apply_token_bitmask: word by word; an all-ones word (the common case inside free
// text) is skipped, an all-zeros word is a plain fill.
#include "ops/token_bitmask.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace vela::ops::cpu {

void apply_token_bitmask(Tensor& logits, const Tensor& bitmask, const Tensor& row_ids) {
  const int64_t vocab = logits.size(1), n_words = bitmask.size(1), n_masks = bitmask.size(0);
  const int64_t n_rows = logits.size(0), row_stride = logits.stride(0);
  const int32_t* ids = row_ids.data<int32_t>();
  const auto* words = reinterpret_cast<const uint32_t*>(bitmask.data<int32_t>());
  float* base = logits.data<float>();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < n_masks; ++k) {
    VELA_CHECK(ids[k] >= 0 && ids[k] < n_rows, "apply_token_bitmask: row id ", ids[k],
               " is outside [0, ", n_rows, ")");
    float* row = base + static_cast<int64_t>(ids[k]) * row_stride;
    const uint32_t* m = words + k * n_words;
    for (int64_t w = 0; w < n_words; ++w) {
      const uint32_t bits = m[w];
      if (bits == 0xFFFFFFFFu) continue;
      const int64_t t0 = w * 32, t1 = std::min<int64_t>(t0 + 32, vocab);
      for (int64_t t = t0; t < t1; ++t)
        if (!((bits >> (t - t0)) & 1u)) row[t] = kNegInf;
    }
  }
}

}  // namespace vela::ops::cpu
