// DecoderBlock: pre-norm attention and MLP with residuals (Llama / Mistral / Qwen2 / Qwen3).
//   h = x + attn(norm1(x));  out = h + mlp(norm2(h))
// In a mixture-of-experts layer (moe.defined()) the sparse Moe replaces the dense MLP.
// The training path (forward_dense_train / backward_dense) saves the activations of one block in
// a DecoderBlockSaved; with activation checkpointing it keeps only the block input and backward
// recomputes the rest.
#pragma once

#include "core/tensor.h"
#include "nn/attention.h"
#include "nn/mlp.h"
#include "nn/moe.h"

namespace vela {

// Parameter gradients of one block (f32, accumulated).
struct DecoderBlockGrads {
  Tensor dinput_norm;  // [hidden]
  AttentionGrads attn;
  Tensor dpost_norm;   // [hidden]
  MlpGrads mlp;
  MoeGrads moe;  // MoE layers only
};

struct DecoderBlockSaved {
  Tensor x;        // [batch, seq, hidden] block input (always kept)
  bool full = false;  // the rest below is present (false after a checkpointed forward)
  Tensor normed1;  // [n, hidden] input_norm(x)
  AttentionSaved attn;
  Tensor h;        // [n, hidden] x + attn
  Tensor normed2;  // [n, hidden] post_norm(h)
  MlpSaved mlp;
  MoeSaved moe;
  // MoE layers: the router statistics of the forward (kept when checkpointed) and the router
  // losses' gradient the trainer sets before backward.
  MoeStats moe_stats;
  MoeRouterGrad router_grad;
};

struct DecoderBlock {
  Tensor input_norm;  // [hidden]
  Attention attn;
  Tensor post_norm;   // [hidden]
  Mlp mlp;
  Moe moe;  // defined in a mixture-of-experts layer, which then has no dense mlp
  float eps = 1e-6f;

  // The feed-forward half: moe when defined, else mlp. x, out: [n_rows, hidden].
  void ffn_forward(const Tensor& x, Tensor& out) const {
    if (moe.defined()) moe.forward(x, out);
    else mlp.forward(x, out);
  }

  // Packed inference path. residual: [n_tokens, hidden], updated in place to the block's output;
  // normed: [n_tokens, hidden], in: input_norm(residual), out: next_norm(new residual) — the
  // closing residual add is fused into the next block's (or the final) RMSNorm.
  void forward_packed(Tensor& residual, Tensor& normed, const Tensor& positions,
                      const Tensor& rope_table, const KVCacheView& kv, int64_t layer_idx,
                      const Tensor& next_norm, float next_eps) const;
  // Whether forward_packed_fused computes this block: a dense MLP, no biases or LoRA.
  bool fusable_packed() const;
  // The packed path as the decode step runs it on CUDA: 5 kernels (ops/fused_gemm.h,
  // ops/qkv_rotary.h) plus attention; residual: [n_tokens, hidden], updated in place to the
  // block's output (un-normed: the next block's norm is its first GEMV's prologue). pieces:
  // undefined, or (multi-row steps: 4 wgmma GEMMs plus attention, no norm kernel) in: the pieces
  // of input_norm's input, out: those of next_norm's (ops/rms_norm.h).
  void forward_packed_fused(Tensor& residual, ops::NormPieces& pieces, const Tensor& positions,
                            const Tensor& rope_table, const KVCacheView& kv, int64_t layer_idx,
                            const Tensor& next_norm) const;
  // The single-row step's L2 hint for this block's attention (ops/l2_warm.h): the leading
  // VELA_DECODE_L2_WARM_MB (default 16) of the gate|up weight its MLP streams next.
  ops::L2Warm decode_l2_warm() const;
  // residual: [batch, seq, hidden], updated in place.
  void forward_dense(Tensor& residual, const Tensor& positions, const Tensor& rope_table,
                     const Tensor& doc_ids) const;
  // forward_dense keeping activations (all of them, or only the input when `checkpoint`).
  void forward_dense_train(Tensor& residual, const Tensor& positions, const Tensor& rope_table,
                           const Tensor& doc_ids, bool checkpoint, DecoderBlockSaved& saved) const;
  // dresidual: [batch, seq, hidden], in: d(block output), out: d(block input).
  void backward_dense(const DecoderBlockSaved& saved, const Tensor& positions,
                      const Tensor& rope_table, const Tensor& doc_ids, Tensor& dresidual,
                      DecoderBlockGrads& grads) const;
};

}  // namespace vela
