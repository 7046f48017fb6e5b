// apply_token_bitmask: constrained decoding's mask on a batch of logits rows, in place. Bit
// (t % 32) of word t / 32 of a mask row says whether token t is allowed; a disallowed token's logit
// becomes -inf. Mask row k applies to logits row row_ids[k] (rows without a constraint are not
// listed). Used by the engine before sampling, on the CPU and on the device alike.
//
//   logits  [n_rows, vocab] f32, unit column stride (rows may be strided), modified in place
//   bitmask [n_masks, ceil(vocab / 32)] i32, contiguous
//   row_ids [n_masks] i32 in [0, n_rows), distinct
// All on one device; stream-ordered on CUDA (no host wait).
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void apply_token_bitmask(Tensor& logits, const Tensor& bitmask, const Tensor& row_ids);

namespace cpu {
void apply_token_bitmask(Tensor& logits, const Tensor& bitmask, const Tensor& row_ids);
}
namespace cuda {
void apply_token_bitmask(Tensor& logits, const Tensor& bitmask, const Tensor& row_ids);
}

}  // namespace vela::ops
