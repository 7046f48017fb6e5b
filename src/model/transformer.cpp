// Transformer forward passes and rotary-table management.
#include "model/transformer.h"

#include <algorithm>

#include "core/env.h"
#include "core/rng.h"
#include "core/scratch_arena.h"
#include "ops/cast.h"
#include "ops/embedding.h"
#include "ops/fused_gemm.h"
#include "ops/gemm.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"

namespace vela {

void Transformer::build_rope_table() {
  rope_table_ = ops::make_rope_table(config.rope, config.max_position_embeddings, device());
}

Tensor Transformer::rope_table(int64_t n_positions) const {
  const auto& s = config.rope.scaling;
  int64_t orig =
      s.original_max_positions > 0 ? s.original_max_positions : config.max_position_embeddings;
  if (s.type == ops::RopeScaling::Type::kDynamic && n_positions > orig) {
    // HF (dynamic_rope_update) recomputes the base from the longest position of this forward.
    return ops::make_rope_table(config.rope, n_positions, device(), n_positions);
  }
  VELA_CHECK(n_positions <= rope_table_.size(0), "position ", n_positions - 1,
             " exceeds max_position_embeddings ", config.max_position_embeddings);
  return rope_table_;
}

Tensor Transformer::logits_from_hidden(const Tensor& hidden) const {
  const int64_t n = hidden.size(0);
  Tensor normed = scratch_tensor(hidden.shape(), hidden.dtype(), hidden.device());
  ops::rms_norm(hidden, final_norm, config.rms_norm_eps, normed);
  Tensor logits = scratch_tensor({n, config.vocab_size}, DType::kF32, hidden.device());
  ops::gemm(normed, lm_head.weight, logits, false, true);
  return logits;
}

namespace {

int32_t max_position(const Tensor& positions) {
  Tensor p = positions.to(Device::cpu());
  const int32_t* d = p.data<int32_t>();
  int32_t m = -1;
  for (int64_t i = 0; i < p.numel(); ++i) {
    VELA_CHECK(d[i] >= 0, "negative position ", d[i]);
    m = std::max(m, d[i]);
  }
  return m;
}

}  // namespace

Tensor Transformer::forward_dense(const Tensor& ids, const Tensor& doc_ids,
                                  const Tensor& positions_in) const {
  VELA_CHECK(ids.dim() == 2 && ids.dtype() == DType::kI32,
             "forward_dense: ids must be [batch, seq] i32, got ", ids.str());
  const int64_t b = ids.size(0), t = ids.size(1), h = config.hidden_size;
  Tensor positions = positions_in;
  if (!positions.defined()) {
    std::vector<int32_t> pos(static_cast<size_t>(b * t));
    Tensor docs = doc_ids.defined() ? doc_ids.to(Device::cpu()) : Tensor();
    for (int64_t i = 0; i < b; ++i) {
      int32_t p = 0;
      for (int64_t j = 0; j < t; ++j) {
        if (docs.defined() && j > 0 &&
            docs.data<int32_t>()[i * t + j] != docs.data<int32_t>()[i * t + j - 1])
          p = 0;
        pos[i * t + j] = p++;
      }
    }
    positions = Tensor::from_vector(pos).to(device());
  }
  VELA_CHECK(positions.numel() == b * t, "forward_dense: positions must have batch * seq entries");
  Tensor table = rope_table(max_position(positions) + 1);
  Tensor residual = Tensor::empty({b, t, h}, dtype(), device());
  Tensor flat = residual.view({b * t, h});
  ops::embedding(embed, ids.view({b * t}).to(device()), flat);
  for (const DecoderBlock& block : blocks) block.forward_dense(residual, positions, table, doc_ids);
  return logits_from_hidden(flat).view({b, t, config.vocab_size});
}

bool Transformer::fused_decode_default() {
  static const bool enabled = env_enabled("VELA_FUSED_DECODE");
  return enabled;
}

bool Transformer::fused_batch_default() {
  static const bool enabled = env_enabled("VELA_FUSED_BATCH");
  return enabled;
}

// The most rows a step may have to take the fused blocks (VELA_FUSED_DECODE_ROWS, 1..8; default 1:
// see use_fused_packed).
static int64_t fused_decode_max_rows() {
  static const int64_t rows = env_int("VELA_FUSED_DECODE_ROWS", 1, 1, 8);
  return rows;
}

bool Transformer::use_norm_pieces(int64_t n_tokens) const {
  return fused_batch && n_tokens > fused_decode_max_rows() &&
         ops::norm_piece_gemms_take(n_tokens, dtype(), device());
}

bool Transformer::use_fused_packed(int64_t n_tokens) const {
  // One row by default: at 2..8 rows the fused GEMVs cost more than the kernels they save
  // (graph-timed, docs/kernels.md), so those batches keep the unfused ops unless the wgmma GEMM
  // takes them (use_norm_pieces).
  if (!device().is_cuda() || n_tokens < 1) return false;
  if (!(fused_decode && n_tokens <= fused_decode_max_rows()) && !use_norm_pieces(n_tokens))
    return false;
  if (dtype() != DType::kBF16 && dtype() != DType::kF16) return false;
  for (const DecoderBlock& b : blocks)
    if (!b.fusable_packed()) return false;
  return true;
}

Tensor Transformer::forward_packed(const Tensor& ids, const Tensor& positions,
                                   const KVCacheView& kv, const Tensor& logits_indices,
                                   Tensor* chunk_max) const {
  VELA_CHECK(ids.dim() == 1 && ids.dtype() == DType::kI32,
             "forward_packed: ids must be [n_tokens] i32, got ", ids.str());
  VELA_CHECK(positions.shape() == ids.shape() && positions.dtype() == DType::kI32,
             "forward_packed: positions must match ids, got ", positions.str());
  const int64_t n = ids.size(0), h = config.hidden_size;
  // kv.max_len = the longest sequence after this step = max position + 1 (no host read here).
  Tensor table = rope_table(kv.max_len);
  Tensor residual = scratch_tensor({n, h}, dtype(), device());
  ops::embedding(embed, ids, residual);
  // `normed` carries each block's normalized input; the last block leaves final_norm(residual).
  Tensor normed = scratch_tensor({n, h}, dtype(), device());
  const bool fused = use_fused_packed(n);
  if (fused) {
    // Decode-sized batches on CUDA: each block's norms, SiLU*up and residual adds live inside its
    // GEMVs (DecoderBlock::forward_packed_fused), 5 kernels plus attention per layer; or, for the
    // wgmma GEMM's rows, inside its 4 GEMMs, which hand on each norm's input in pieces.
    ops::NormPieces pieces;  // multi-row: the next norm's input, from GEMM to GEMM
    if (use_norm_pieces(n) && !blocks.empty()) {
      pieces.scaled = scratch_tensor({n, h}, dtype(), device());
      pieces.row_sq =
          scratch_tensor({n, (h + ops::kRowSqGroup - 1) / ops::kRowSqGroup}, DType::kF32, device());
      ops::norm_pieces(residual, blocks[0].input_norm, pieces);
    }
    for (size_t l = 0; l < blocks.size(); ++l) {
      const Tensor& next_norm = l + 1 < blocks.size() ? blocks[l + 1].input_norm : final_norm;
      blocks[l].forward_packed_fused(residual, pieces, positions, table, kv,
                                     static_cast<int64_t>(l), next_norm);
    }
    ops::rms_norm(residual, final_norm, config.rms_norm_eps, normed);
  } else if (!blocks.empty())
    ops::rms_norm(residual, blocks[0].input_norm, blocks[0].eps, normed);
  else
    ops::rms_norm(residual, final_norm, config.rms_norm_eps, normed);
  for (size_t l = 0; !fused && l < blocks.size(); ++l) {
    const bool last = l + 1 == blocks.size();
    blocks[l].forward_packed(residual, normed, positions, table, kv, static_cast<int64_t>(l),
                             last ? final_norm : blocks[l + 1].input_norm,
                             last ? static_cast<float>(config.rms_norm_eps) : blocks[l + 1].eps);
  }
  // The final-normed rows to score. When every row is scored (decode steps, verification) they
  // are the rows in order (the indices increase strictly), so there is nothing to gather.
  Tensor selected = normed;
  // The rule, checked where it is cheap to see.
  if (logits_indices.size(0) == n && logits_indices.is_cpu() &&
      logits_indices.dtype() == DType::kI32) {
    const int32_t* li = logits_indices.data<int32_t>();
    for (int64_t i = 0; i < n; ++i)
      VELA_CHECK(li[i] == i, "forward_packed: logits_indices must increase (row ", i, " is ", li[i],
                 ")");
  }
  if (logits_indices.size(0) != n) {
    selected = scratch_tensor({logits_indices.size(0), h}, dtype(), device());
    ops::embedding(normed, logits_indices, selected);
  }
  Tensor logits =
      scratch_tensor({logits_indices.size(0), config.vocab_size}, DType::kF32, device());
  if (chunk_max != nullptr)
    ops::gemm_argmax_chunks(selected, lm_head.weight, logits, *chunk_max);
  else
    ops::gemm(selected, lm_head.weight, logits, false, true);
  return logits;
}

bool Transformer::same_storage(const Transformer& o) const {
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.defined() == b.defined() && (!a.defined() || a.data_ptr() == b.data_ptr());
  };
  auto same_linear = [&](const Linear& a, const Linear& b) {
    return same(a.weight, b.weight) && same(a.bias, b.bias);
  };
  if (blocks.size() != o.blocks.size() || !same(embed, o.embed) ||
      !same(final_norm, o.final_norm) || !same_linear(lm_head, o.lm_head) ||
      !same(rope_table_, o.rope_table_))
    return false;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const DecoderBlock& a = blocks[i];
    const DecoderBlock& b = o.blocks[i];
    if (!same(a.input_norm, b.input_norm) || !same(a.post_norm, b.post_norm) ||
        !same_linear(a.attn.qkv, b.attn.qkv) || !same_linear(a.attn.o, b.attn.o) ||
        !same(a.attn.q_norm, b.attn.q_norm) || !same(a.attn.k_norm, b.attn.k_norm) ||
        !same_linear(a.mlp.gate_up, b.mlp.gate_up) || !same_linear(a.mlp.down, b.mlp.down) ||
        !same_linear(a.moe.router, b.moe.router) || !same(a.moe.gate_up, b.moe.gate_up) ||
        !same(a.moe.down, b.moe.down) || !same_linear(a.moe.shared.gate_up, b.moe.shared.gate_up))
      return false;
  }
  return true;
}

}  // namespace vela
