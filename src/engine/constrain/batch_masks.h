// BatchMasks: the token masks of one sampling step, one row per constrained sample row, filled
// from the GrammarMatchers on the host and applied to the logits (ops::apply_token_bitmask) on the
// logits' device just before the Sampler samples them (on that device). Buffers are allocated once (max_rows);
// on CUDA the host side is pinned and uploaded stream-ordered. Loop thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "engine/constrain/matcher.h"

namespace vela::constrain {

class BatchMasks {
 public:
  BatchMasks(int64_t vocab_size, int32_t max_rows, Device device);

  void clear() {
    n_masks_ = 0;
    matchers_.clear();
  }
  // Queues the matcher's next-token mask for logits row `row`.
  void add(GrammarMatcher& m, int32_t row);
  // Computes the queued masks, rows in parallel (matchers are independent; their compiled
  // grammars' caches are thread-safe).
  void fill();
  int32_t size() const { return n_masks_; }
  // Disallowed tokens of the listed rows become -inf; logits [n_rows, vocab] on `device`.
  void apply(Tensor& logits);

 private:
  int64_t vocab_size_, n_words_;
  int32_t max_rows_;
  Device device_;
  int32_t n_masks_ = 0;
  std::vector<GrammarMatcher*> matchers_;  // [n_masks]
  Tensor host_bits_, host_rows_;      // [max_rows, n_words] i32, [max_rows] i32 (pinned on CUDA)
  Tensor device_bits_, device_rows_;  // the device copies (CUDA only)
};

}  // namespace vela::constrain
