// Attention forward passes (inference: packed + paged KV; training: dense causal).
#include "nn/attention.h"

#include <cmath>

#include "core/env.h"
#include "core/scratch_arena.h"
#include "nn/lora.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/fused_gemm.h"
#include "ops/gemm.h"
#include "ops/qkv_rotary.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"

namespace vela {

namespace {

// Whether the fused decode block folds rotary and the cache write into the q|k|v GEMV's epilogue
// (models without QK-norm; VELA_FUSED_QKV_ROTARY=0 keeps the separate qkv_rotary_kv_write for A/B
// runs).
bool fused_qkv_rotary() {
  static const bool enabled = env_enabled("VELA_FUSED_QKV_ROTARY");
  return enabled;
}

}  // namespace

void Attention::project_qkv(const Tensor& x, const Tensor& positions, const Tensor& rope_table,
                            Tensor& q, Tensor& k, Tensor& v) const {
  const int64_t n = x.size(0), qd = cfg.q_dim(), kvd = cfg.kv_dim();
  DType dt = x.dtype();
  q = scratch_tensor({n, cfg.n_heads, cfg.head_dim}, dt, x.device());
  k = scratch_tensor({n, cfg.n_kv_heads, cfg.head_dim}, dt, x.device());
  v = scratch_tensor({n, cfg.n_kv_heads, cfg.head_dim}, dt, x.device());
  Tensor parts[3] = {q.view({n, qd}), k.view({n, kvd}), v.view({n, kvd})};
  int64_t begin[3] = {0, qd, qd + kvd}, width[3] = {qd, kvd, kvd};
  for (int i = 0; i < 3; ++i) {
    Tensor w = qkv.weight.slice(0, begin[i], begin[i] + width[i]);
    ops::gemm(x, w, parts[i], false, true);
    if (qkv.bias.defined()) ops::add(parts[i], qkv.bias.slice(0, begin[i], begin[i] + width[i]), parts[i]);
  }
  if (qkv.lora) qkv.lora->forward_add_parts(x, parts, begin, 3);  // q, k, v in one launch each
  if (q_norm.defined()) {
    Tensor qr = q.view({n * cfg.n_heads, cfg.head_dim});
    Tensor kr = k.view({n * cfg.n_kv_heads, cfg.head_dim});
    ops::rms_norm(qr, q_norm, cfg.norm_eps, qr);
    ops::rms_norm(kr, k_norm, cfg.norm_eps, kr);
  }
  ops::rotary(q, positions, rope_table);
  ops::rotary(k, positions, rope_table);
}

bool Attention::fused_qkv_default() {
  static const bool enabled = env_enabled("VELA_FUSED_QKV");
  return enabled;
}

void Attention::forward_packed(const Tensor& x, const Tensor& positions, const Tensor& rope_table,
                               const KVCacheView& kv, int64_t layer_idx, Tensor& out) const {
  if (fused_qkv && x.device().is_cuda() && fusable_packed()) {
    const int64_t n = x.size(0);
    Tensor attn = scratch_tensor({n, cfg.n_heads, cfg.head_dim}, x.dtype(), x.device());
    {
      ScratchMark temporaries;  // q is free again before attn is used
      Tensor q = scratch_tensor({n, cfg.n_heads, cfg.head_dim}, x.dtype(), x.device());
      Tensor k_cache = kv.k_cache.select(0, layer_idx), v_cache = kv.v_cache.select(0, layer_idx);
      ops::gemm_rotary_kv_write(x, qkv.weight, positions, rope_table, q_norm, k_norm,
                                cfg.norm_eps, kv.out_cache_loc, q, k_cache, v_cache);
      attend(q, k_cache, v_cache, kv, attn);
    }
    o.forward(attn.view({n, cfg.q_dim()}), out);
    return;
  }
  Tensor q, k, v;
  project_qkv(x, positions, rope_table, q, k, v);
  Tensor k_cache = kv.k_cache.select(0, layer_idx), v_cache = kv.v_cache.select(0, layer_idx);
  ops::kv_write(k, v, kv.out_cache_loc, k_cache, v_cache);
  Tensor attn = scratch_tensor(q.shape(), q.dtype(), q.device());
  attend(q, k_cache, v_cache, kv, attn);
  o.forward(attn.view({x.size(0), cfg.q_dim()}), out);
}

void Attention::attend(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                       const KVCacheView& kv, Tensor& attn, const ops::L2Warm& warm) const {
  float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
  switch (kv.mode) {
    case AttentionMode::kDecode: {
      Tensor o_part = kv.o_part, lse_part = kv.lse_part;
      ops::paged_decode_attention(q, k_cache, v_cache, kv.req_to_token, kv.req_pool_indices,
                                  kv.seq_lens, scale, kv.n_splits, o_part, lse_part, attn, warm);
      break;
    }
    case AttentionMode::kPrefill:
      if (kv.n_decode_seqs > 0) {  // a mixed step's decode rows (one query each, rows first)
        const int64_t nd = kv.n_decode_seqs;
        Tensor o_part = kv.o_part, lse_part = kv.lse_part, out = attn.slice(0, 0, nd);
        ops::paged_decode_attention(q.slice(0, 0, nd), k_cache, v_cache, kv.req_to_token,
                                    kv.req_pool_indices.slice(0, 0, nd),
                                    kv.seq_lens.slice(0, 0, nd), scale, kv.n_splits, o_part,
                                    lse_part, out);
        if (kv.n_tiles == 0) break;
      }
      ops::paged_prefill_attention(q, k_cache, v_cache, kv.req_to_token, kv.req_pool_indices,
                                   kv.seq_lens, kv.qo_indptr, kv.tile_seq_idx, kv.tile_q_start,
                                   kv.n_tiles, kv.tile_q, scale, attn);
      break;
    case AttentionMode::kGeneric:
      ops::paged_attention(q, k_cache, v_cache, kv.req_to_token, kv.req_pool_indices, kv.seq_lens,
                           kv.qo_indptr, scale, attn);
      break;
  }
}

bool Attention::fusable_packed() const {
  return !qkv.bias.defined() && !qkv.lora && !o.bias.defined() && !o.lora;
}

void Attention::forward_packed_fused(Tensor& residual, ops::NormPieces& pieces,
                                     const Tensor& input_norm, float eps, const Tensor& post_norm,
                                     const Tensor& positions, const Tensor& rope_table,
                                     const KVCacheView& kv, int64_t layer_idx,
                                     const ops::L2Warm& warm) const {
  ScratchMark temporaries;
  const int64_t n = residual.size(0);
  Tensor q = scratch_tensor({n, cfg.n_heads, cfg.head_dim}, residual.dtype(), residual.device());
  Tensor k_cache = kv.k_cache.select(0, layer_idx), v_cache = kv.v_cache.select(0, layer_idx);
  if (pieces.defined()) {
    // Multi-row: one GEMM over the norm's pieces, rstd, QK-norm, rotary and the cache write in
    // its epilogue.
    ops::rms_norm_gemm_rotary_kv_write(pieces, eps, qkv.weight, positions, rope_table, q_norm,
                                       k_norm, cfg.norm_eps, kv.out_cache_loc, q, k_cache, v_cache);
  } else if (!q_norm.defined() && fused_qkv_rotary()) {
    // One GEMV: rms_norm, the q|k|v projection, rotary and the cache write in its epilogue.
    ops::rms_norm_gemm_rotary_kv_write(residual, input_norm, eps, qkv.weight, positions,
                                       rope_table, kv.out_cache_loc, q, k_cache, v_cache);
  } else {
    Tensor qkv_out = scratch_tensor({n, qkv.out_features()}, residual.dtype(), residual.device());
    ops::rms_norm_gemm(residual, input_norm, eps, qkv.weight, qkv_out);
    ops::qkv_rotary_kv_write(qkv_out, positions, rope_table, q_norm, k_norm, cfg.norm_eps,
                             kv.out_cache_loc, q, k_cache, v_cache);
  }
  Tensor attn = scratch_tensor(q.shape(), q.dtype(), q.device());
  attend(q, k_cache, v_cache, kv, attn, warm);
  Tensor attn_rows = attn.view({n, cfg.q_dim()});
  if (pieces.defined())
    ops::gemm_add(attn_rows, o.weight, residual, post_norm, pieces);  // + post_norm's pieces
  else
    ops::gemm_add(attn_rows, o.weight, residual);
}

void Attention::forward_dense(const Tensor& x, const Tensor& positions, const Tensor& rope_table,
                              const Tensor& doc_ids, Tensor& out) const {
  const int64_t b = x.size(0), t = x.size(1);
  Tensor q, k, v;
  project_qkv(x.view({b * t, cfg.hidden}), positions, rope_table, q, k, v);
  Tensor attn = Tensor::empty({b, t, cfg.n_heads, cfg.head_dim}, x.dtype(), x.device());
  float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
  ops::causal_attention(q.view({b, t, cfg.n_heads, cfg.head_dim}),
                        k.view({b, t, cfg.n_kv_heads, cfg.head_dim}),
                        v.view({b, t, cfg.n_kv_heads, cfg.head_dim}), doc_ids, scale, attn);
  Tensor o2 = out.view({b * t, cfg.hidden});
  o.forward(attn.view({b * t, cfg.q_dim()}), o2);
}

}  // namespace vela
