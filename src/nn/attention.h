// Attention layer (GQA / MQA / MHA) with optional q/k/v and o biases and QK-norm (qwen3).
// The q, k and v projections are one fused weight [q_dim + 2 * kv_dim, hidden] (split views are
// used for the GEMMs); rotary is applied to q and k before the KV write.
#pragma once

#include "core/tensor.h"
#include "nn/kv_cache_view.h"
#include "nn/linear.h"
#include "ops/l2_warm.h"
#include "ops/rms_norm.h"

namespace vela {

struct AttentionConfig {
  int64_t hidden = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float norm_eps = 1e-6f;  // QK-norm eps
  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
};

// Parameter gradients (f32, accumulated); biases and QK-norm grads are undefined when the layer has
// none.
struct AttentionGrads {
  Tensor dqkv_weight;  // [q_dim + 2 * kv_dim, hidden]
  Tensor dqkv_bias;    // [q_dim + 2 * kv_dim]
  Tensor do_weight;    // [hidden, q_dim]
  Tensor do_bias;      // [hidden]
  Tensor dq_norm;      // [head_dim]
  Tensor dk_norm;      // [head_dim]
};

// What the dense backward needs from the forward.
struct AttentionSaved {
  Tensor q_raw, k_raw;  // [n, H, D], [n, Hkv, D] before QK-norm (only with QK-norm)
  Tensor q, k, v;       // [n, H, D], [n, Hkv, D], [n, Hkv, D] as attended (normed, rotated)
  Tensor attn;          // [n, H, D] attention output before o_proj
  Tensor lse;           // [batch, H, seq] f32 log-sum-exp of the attention rows
};

struct Attention {
  AttentionConfig cfg;
  Linear qkv;     // weight [q_dim + 2 * kv_dim, hidden], bias optional
  Linear o;       // weight [hidden, q_dim]
  Tensor q_norm;  // [head_dim] or undefined
  Tensor k_norm;  // [head_dim] or undefined

  // Packed inference path.
  //   x: [n_tokens, hidden]   positions: [n_tokens] i32   rope_table: [n_positions, rotary_dim]
  //   out: [n_tokens, hidden]; K/V of the new tokens are written into layer `layer_idx` of kv.
  // On CUDA, when fusable_packed() and fused_qkv, q|k|v is one GEMM over the fused weight and
  // QK-norm, rotary and the KV write are one qkv_rotary_kv_write (multi-row decode and prefill:
  // 2 GEMMs and 2..4 small kernels fewer per layer); otherwise three GEMMs and the unfused ops.
  void forward_packed(const Tensor& x, const Tensor& positions, const Tensor& rope_table,
                      const KVCacheView& kv, int64_t layer_idx, Tensor& out) const;
  // Default on; VELA_FUSED_QKV=0 sets the default off (A/B measurements), tests flip it directly.
  bool fused_qkv = fused_qkv_default();
  static bool fused_qkv_default();

  // Whether forward_packed_fused computes this layer (no biases, no LoRA on qkv / o).
  bool fusable_packed() const;
  // The packed path with its neighbours fused (the decode path, ops/fused_gemm.h and
  // ops/qkv_rotary.h): residual += o(attention(rotary(qkv(rms_norm(residual, input_norm))))).
  //   residual: [n_tokens, hidden], updated in place
  //   pieces: undefined (single-row steps), or (multi-row steps, ops/rms_norm.h) in: the pieces
  //           of input_norm's input, out: those of post_norm's (the o projection writes them)
  //   warm: the L2 hint decode attention takes with it (ops/l2_warm.h; the block's next weights)
  void forward_packed_fused(Tensor& residual, ops::NormPieces& pieces, const Tensor& input_norm,
                            float eps, const Tensor& post_norm, const Tensor& positions,
                            const Tensor& rope_table, const KVCacheView& kv, int64_t layer_idx,
                            const ops::L2Warm& warm = ops::L2Warm()) const;
  // Dense training path (causal, document boundaries optional).
  //   x: [batch, seq, hidden]   positions: [batch * seq] i32   doc_ids: [batch, seq] i32 or undefined
  //   out: [batch, seq, hidden]
  void forward_dense(const Tensor& x, const Tensor& positions, const Tensor& rope_table,
                     const Tensor& doc_ids, Tensor& out) const;
  // forward_dense that keeps the activations backward needs.
  void forward_dense_train(const Tensor& x, const Tensor& positions, const Tensor& rope_table,
                           const Tensor& doc_ids, Tensor& out, AttentionSaved& saved) const;
  // x: [batch, seq, hidden] the forward input   dout: [batch, seq, hidden]
  // dx: [batch, seq, hidden] (overwritten)
  void backward_dense(const Tensor& x, const Tensor& positions, const Tensor& rope_table,
                      const Tensor& doc_ids, const AttentionSaved& saved, const Tensor& dout,
                      Tensor& dx, AttentionGrads& grads) const;

 private:
  // Attention of q [n, H, D] over layer caches by kv.mode into attn [n, H, D] (decode steps pass
  // `warm` to ops::paged_decode_attention).
  void attend(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const KVCacheView& kv,
              Tensor& attn, const ops::L2Warm& warm = ops::L2Warm()) const;
  // Projects x [n, hidden] into contiguous q [n, H, D], k and v [n, Hkv, D], applies QK-norm and
  // rotary to q and k.
  void project_qkv(const Tensor& x, const Tensor& positions, const Tensor& rope_table, Tensor& q,
                   Tensor& k, Tensor& v) const;
  // The same for the training path, keeping q/k before QK-norm when there is one.
  void project_qkv_train(const Tensor& x, const Tensor& positions, const Tensor& rope_table,
                         AttentionSaved& saved) const;
};

}  // namespace vela
