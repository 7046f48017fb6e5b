// DecoderBlock: pre-norm attention and MLP with residuals (Llama / Mistral / Qwen2 / Qwen3).
//   h = x + attn(norm1(x));  out = h + mlp(norm2(h))
#pragma once

#include "core/tensor.h"
#include "nn/attention.h"
#include "nn/mlp.h"

namespace vela {

struct DecoderBlock {
  Tensor input_norm;  // [hidden]
  Attention attn;
  Tensor post_norm;   // [hidden]
  Mlp mlp;
  float eps = 1e-6f;

  // residual: [n_tokens, hidden], updated in place to the block's output.
  void forward_packed(Tensor& residual, const Tensor& positions, const Tensor& rope_table,
                      const KVCacheView& kv, int64_t layer_idx) const;
  // residual: [batch, seq, hidden], updated in place.
  void forward_dense(Tensor& residual, const Tensor& positions, const Tensor& rope_table,
                     const Tensor& doc_ids) const;
};

}  // namespace vela
