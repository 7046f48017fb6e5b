// BatchMasks: the token masks of one sampling step, one row per constrained sample row, filled
// from the GrammarMatchers on the host and applied to the logits (ops::apply_token_bitmask) on the
// logits' device just before the Sampler samples them (on that device). Buffers are allocated once
// (max_rows); on CUDA the host side is pinned and uploaded stream-ordered. Loop thread only.
//
// Speculative decoding: a sample verifying m drafts queues one group of m + 1 consecutive rows;
// fill() advances (a copy of the position of) its matcher along the drafts, masking row j with the
// grammar state after drafts[0 .. j), and rolls the matcher back, so between steps a matcher
// always stands after its sample's output. The drafts were cut to the grammar when proposed
// (GrammarMatcher::accepted_prefix); rows past a draft the grammar rejects would allow nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "core/tensor.h"
#include "engine/constrain/matcher.h"

namespace vela::constrain {

class BatchMasks {
 public:
  BatchMasks(int64_t vocab_size, int32_t max_rows, Device device);

  void clear();
  // Queues masks for logits rows row .. row + n_drafts: row row + j gets the matcher's next-token
  // mask after drafts[0 .. j) (n_drafts = 0: the mask of its current state). The drafts must stay
  // alive until fill().
  void add(GrammarMatcher& m, int32_t row, const int32_t* drafts = nullptr, int32_t n_drafts = 0);
  // Computes the queued masks, groups in parallel (matchers are independent; their compiled
  // grammars' caches are thread-safe).
  void fill();
  int32_t size() const { return n_masks_; }
  // Disallowed tokens of the listed rows become -inf; logits [n_rows, vocab] on `device`.
  void apply(Tensor& logits);
  // After fill(): the host mask of logits row `row` (n_words() words), or null when it has none.
  const uint32_t* row_bits(int32_t row) const;
  int64_t n_words() const { return n_words_; }

 private:
  struct Group {
    GrammarMatcher* matcher;
    int32_t first;  // its first mask (index into the buffers)
    const int32_t* drafts;
    int32_t n_drafts;
  };
  int64_t vocab_size_, n_words_;
  int32_t max_rows_;
  Device device_;
  int32_t n_masks_ = 0;
  std::vector<Group> groups_;         // reserved for max_rows
  std::vector<int32_t> mask_of_row_;  // [max_rows] mask index of each logits row, -1: none
  Tensor host_bits_, host_rows_;      // [max_rows, n_words] i32, [max_rows] i32 (pinned on CUDA)
  Tensor device_bits_, device_rows_;  // the device copies (CUDA only)
  // CUDA: the upload runs on its own stream, so it neither waits for the forward in flight on the
  // engine's stream nor makes the host wait; the mask kernel waits for it (an event).
  std::unique_ptr<cuda::SideStream> upload_;
};

}  // namespace vela::constrain
