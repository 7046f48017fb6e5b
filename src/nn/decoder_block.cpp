// DecoderBlock forward passes. Residual adds are fused into the RMSNorm that follows them (on the
// packed path also the closing one, into the next block's input norm).
#include "nn/decoder_block.h"

#include <algorithm>

#include "core/env.h"
#include "core/scratch_arena.h"
#include "ops/elementwise.h"
#include "ops/fused_gemm.h"
#include "ops/rms_norm.h"

namespace vela {

void DecoderBlock::forward_packed(Tensor& residual, Tensor& normed, const Tensor& positions,
                                  const Tensor& rope_table, const KVCacheView& kv,
                                  int64_t layer_idx, const Tensor& next_norm,
                                  float next_eps) const {
  ScratchMark temporaries;  // this block's temporaries are free again when it returns
  Tensor attn_out = scratch_tensor(residual.shape(), residual.dtype(), residual.device());
  attn.forward_packed(normed, positions, rope_table, kv, layer_idx, attn_out);
  Tensor mlp_in = scratch_tensor(residual.shape(), residual.dtype(), residual.device());
  ops::add_rms_norm(attn_out, residual, post_norm, eps, mlp_in);  // residual += attn_out
  ffn_forward(mlp_in, attn_out);
  ops::add_rms_norm(attn_out, residual, next_norm, next_eps, normed);  // residual += mlp_out
}

bool DecoderBlock::fusable_packed() const {
  auto plain = [](const Linear& l) { return !l.bias.defined() && !l.lora; };
  return !moe.defined() && attn.fusable_packed() && plain(mlp.gate_up) && plain(mlp.down);
}

// Single-row decode: what the attention's split merge pulls into L2 for the gate|up GEMV
// (ops/l2_warm.h): VELA_DECODE_L2_WARM_MB (read once, default 16, 0 = none) leading bytes of
// gate|up, half from its gate rows and half from its up rows, the order the one-row GEMV reads
// them. (o's weight first was slower: bench/results/decode_l2_warm_h100.txt.)
ops::L2Warm DecoderBlock::decode_l2_warm() const {
  static const int64_t bytes = env_int("VELA_DECODE_L2_WARM_MB", 16, 0, 1024) << 20;
  ops::L2Warm warm;
  const Tensor& w = mlp.gate_up.weight;
  const int64_t inter = mlp.inter(), row_bytes = w.size(1) * w.element_size();
  const int64_t rows = std::min(inter, bytes / (2 * row_bytes));
  if (rows > 0) {
    warm.ranges[0] = w.slice(0, 0, rows);
    warm.ranges[1] = w.slice(0, inter, inter + rows);
  }
  return warm;
}

void DecoderBlock::forward_packed_fused(Tensor& residual, ops::NormPieces& pieces,
                                        const Tensor& positions, const Tensor& rope_table,
                                        const KVCacheView& kv, int64_t layer_idx,
                                        const Tensor& next_norm) const {
  attn.forward_packed_fused(residual, pieces, input_norm, eps, post_norm, positions, rope_table, kv,
                            layer_idx, pieces.defined() ? ops::L2Warm() : decode_l2_warm());
  ScratchMark temporaries;
  Tensor act = scratch_tensor({residual.size(0), mlp.inter()}, residual.dtype(), residual.device());
  if (!pieces.defined()) {
    ops::rms_norm_gemm_silu_mul(residual, post_norm, eps, mlp.gate_up.weight, act);
    ops::gemm_add(act, mlp.down.weight, residual);  // residual += down(silu(gate) * up)
    return;
  }
  ops::rms_norm_gemm_silu_mul(pieces, eps, mlp.gate_up.weight, act);
  ops::gemm_add(act, mlp.down.weight, residual, next_norm, pieces);  // + next_norm's pieces
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
  ffn_forward(normed, attn_flat);
  ops::add(flat, attn_flat, flat);
}

}  // namespace vela
