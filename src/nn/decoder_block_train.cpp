// DecoderBlock training path. Forward keeps what backward needs (or, checkpointed, only the block
// input); backward recomputes a checkpointed block's forward from that input with the very same
// code, so checkpointing changes memory, never the gradients.
//   h = x + attn(norm1(x)),  out = h + mlp(norm2(h))
//   dh = dout + norm2_backward(mlp_backward(dout)),  dx = dh + norm1_backward(attn_backward(dh))
#include "nn/decoder_block.h"
#include "ops/elementwise.h"
#include "ops/rms_norm.h"

namespace vela {

namespace {

// The full training forward of `block` on `residual` (updated in place), saving into `saved`.
void forward_saving(const DecoderBlock& block, Tensor& residual, const Tensor& positions,
                    const Tensor& rope_table, const Tensor& doc_ids, DecoderBlockSaved& saved) {
  const int64_t n = residual.size(0) * residual.size(1), hidden = residual.size(2);
  const DType dt = residual.dtype();
  const Device dev = residual.device();
  Tensor flat = residual.view({n, hidden});
  saved.normed1 = Tensor::empty({n, hidden}, dt, dev);
  ops::rms_norm(flat, block.input_norm, block.eps, saved.normed1);
  Tensor attn_out = Tensor::empty(residual.shape(), dt, dev);
  block.attn.forward_dense_train(saved.normed1.view(residual.shape()), positions, rope_table,
                                 doc_ids, attn_out, saved.attn);
  saved.h = Tensor::empty({n, hidden}, dt, dev);
  ops::add(flat, attn_out.view({n, hidden}), saved.h);
  saved.normed2 = Tensor::empty({n, hidden}, dt, dev);
  ops::rms_norm(saved.h, block.post_norm, block.eps, saved.normed2);
  Tensor mlp_out = attn_out.view({n, hidden});  // reuse: attn_out is no longer needed
  if (block.moe.defined())
    block.moe.forward_train(saved.normed2, mlp_out, saved.moe, &saved.moe_stats);
  else
    block.mlp.forward_train(saved.normed2, mlp_out, saved.mlp);
  ops::add(saved.h, mlp_out, flat);
  saved.full = true;
}

}  // namespace

void DecoderBlock::forward_dense_train(Tensor& residual, const Tensor& positions,
                                       const Tensor& rope_table, const Tensor& doc_ids,
                                       bool checkpoint, DecoderBlockSaved& saved) const {
  VELA_CHECK(residual.dim() == 3 && residual.is_contiguous(),
             "DecoderBlock::forward_dense_train: residual must be a contiguous [batch, seq, "
             "hidden], got ",
             residual.str());
  saved = DecoderBlockSaved{};
  saved.x = residual.clone();
  forward_saving(*this, residual, positions, rope_table, doc_ids, saved);
  if (checkpoint) {
    Tensor x = saved.x;
    MoeStats stats = std::move(saved.moe_stats);
    saved = DecoderBlockSaved{};
    saved.x = x;
    saved.moe_stats = std::move(stats);
  }
}

void DecoderBlock::backward_dense(const DecoderBlockSaved& saved_in, const Tensor& positions,
                                  const Tensor& rope_table, const Tensor& doc_ids,
                                  Tensor& dresidual, DecoderBlockGrads& grads) const {
  VELA_CHECK(saved_in.x.defined() && dresidual.shape() == saved_in.x.shape(),
             "DecoderBlock::backward_dense: dresidual ", dresidual.str(),
             " must match the saved block input ", saved_in.x.str());
  DecoderBlockSaved recomputed;
  const DecoderBlockSaved* s = &saved_in;
  if (!saved_in.full) {
    Tensor residual = saved_in.x.clone();
    recomputed.x = saved_in.x;
    forward_saving(*this, residual, positions, rope_table, doc_ids, recomputed);  // same routing
    s = &recomputed;
  }
  const Shape shape3 = dresidual.shape();
  const int64_t n = shape3[0] * shape3[1], hidden = shape3[2];
  Tensor dflat = dresidual.view({n, hidden});
  Tensor dnormed = Tensor::empty({n, hidden}, dresidual.dtype(), dresidual.device());
  // out = h + mlp(norm2(h))
  if (moe.defined())
    moe.backward(s->normed2, s->moe, saved_in.router_grad, dflat, dnormed, grads.moe);
  else
    mlp.backward(s->normed2, s->mlp, dflat, dnormed, grads.mlp);
  ops::add_rms_norm_backward(s->h, post_norm, eps, dnormed, dflat, grads.dpost_norm);  // dflat = dh
  // h = x + attn(norm1(x))
  Tensor dnormed3 = dnormed.view(shape3);
  attn.backward_dense(s->normed1.view(shape3), positions, rope_table, doc_ids, s->attn, dresidual,
                      dnormed3, grads.attn);
  ops::add_rms_norm_backward(s->x.view({n, hidden}), input_norm, eps, dnormed, dflat,
                             grads.dinput_norm);  // dflat = dx
}

}  // namespace vela
