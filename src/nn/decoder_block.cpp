// DecoderBlock forward passes. The second residual add is fused into the post-attention RMSNorm.
#include "nn/decoder_block.h"

#include "core/scratch_arena.h"
#include "ops/elementwise.h"
#include "ops/rms_norm.h"

namespace vela {

void DecoderBlock::forward_packed(Tensor& residual, const Tensor& positions,
                                  const Tensor& rope_table, const KVCacheView& kv,
                                  int64_t layer_idx) const {
  ScratchMark temporaries;  // this block's temporaries are free again when it returns
  Tensor normed = scratch_tensor(residual.shape(), residual.dtype(), residual.device());
  ops::rms_norm(residual, input_norm, eps, normed);
  Tensor attn_out = scratch_tensor(residual.shape(), residual.dtype(), residual.device());
  attn.forward_packed(normed, positions, rope_table, kv, layer_idx, attn_out);
  ops::add_rms_norm(attn_out, residual, post_norm, eps, normed);  // residual += attn_out
  mlp.forward(normed, attn_out);
  ops::add(residual, attn_out, residual);
}

void DecoderBlock::forward_dense(Tensor& residual, const Tensor& positions,
                                 const Tensor& rope_table, const Tensor& doc_ids) const {
  const int64_t n = residual.size(0) * residual.size(1), hidden = residual.size(2);
  Tensor flat = residual.view({n, hidden});
  Tensor normed = Tensor::empty({n, hidden}, residual.dtype(), residual.device());
  ops::rms_norm(flat, input_norm, eps, normed);
  Tensor attn_out = Tensor::empty(residual.shape(), residual.dtype(), residual.device());
  attn.forward_dense(normed.view(residual.shape()), positions, rope_table, doc_ids, attn_out);
  Tensor attn_flat = attn_out.view({n, hidden});
  ops::add_rms_norm(attn_flat, flat, post_norm, eps, normed);
  mlp.forward(normed, attn_flat);
  ops::add(flat, attn_flat, flat);
}

}  // namespace vela
