// Transformer: the decoder-only language model (embedding, DecoderBlocks, final RMSNorm, LM head)
// with the two forward paths of ARCHITECTURE §3:
//   forward_dense   training path on [batch, seq] ids (causal, document boundaries optional)
//   forward_packed  inference path on a ragged batch [n_tokens] with a KV-cache view; logits are
//                   computed only at the rows asked for (each request's last position)
// Weights are loaded / saved in the Hugging Face layout by model/weights.h. Forward passes are
// const and may run concurrently on different KV caches.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/model_config.h"
#include "nn/decoder_block.h"
#include "nn/kv_cache_view.h"
#include "nn/linear.h"

namespace vela {

struct LoraAdapterSet;  // model/lora_adapter.h

class Transformer {
 public:
  ModelConfig config;
  Tensor embed;  // [vocab, hidden]
  std::vector<DecoderBlock> blocks;
  Tensor final_norm;  // [hidden]
  Linear lm_head;     // weight [vocab, hidden] (aliases `embed` when tied)
  // Serving LoRA adapters chosen per row (model/lora_adapter.h), or null; the hooks themselves sit
  // on the projections (Linear::lora).
  std::shared_ptr<LoraAdapterSet> lora_adapters;

  DType dtype() const { return embed.dtype(); }
  Device device() const { return embed.device(); }

  // Loads `<dir>/config.json` and the safetensors weights, converted to `dtype` on `device`.
  static Transformer load(const std::string& dir, DType dtype = DType::kF32,
                          Device device = Device::cpu());
  // A randomly initialised model (normal(0, init_std) projections, unit norms), for benchmarks.
  static Transformer random(const ModelConfig& config, DType dtype, Device device, uint64_t seed,
                            float init_std = 0.02f);

  // ids: [batch, seq] i32; doc_ids: [batch, seq] i32 or undefined; positions: [batch * seq] i32 or
  // undefined (0..seq-1 per row, restarting at document starts when doc_ids is given).
  // Returns logits [batch, seq, vocab] f32.
  Tensor forward_dense(const Tensor& ids, const Tensor& doc_ids = Tensor(),
                       const Tensor& positions = Tensor()) const;

  // ids, positions: [n_tokens] i32; logits_indices: [n_out] i32 rows of the batch to score, in
  // increasing order (n_out = n_tokens: every row, read in order without the indices).
  // Returns logits [n_out, vocab] f32. chunk_max, when given: [>= n_out, >= ceil(vocab / 128)]
  // i64, filled with the sampler's argmax pieces of the logits (ops::argmax_chunks; from the LM
  // head's epilogue where the GEMM allows, ops::gemm_argmax_chunks).
  Tensor forward_packed(const Tensor& ids, const Tensor& positions, const KVCacheView& kv,
                        const Tensor& logits_indices, Tensor* chunk_max = nullptr) const;

  // The rotary table serving positions < n_positions (dynamic NTK depends on it; other scalings
  // return the table built at load).
  Tensor rope_table(int64_t n_positions) const;

  void build_rope_table();

  // True when every weight tensor (and the rotary table) of `other` is the same memory as this
  // one's: a by-value copy of a Transformer shares its tensors (Tensor is ref-counted), which is
  // how an in-process trainer lets the engine read its compute weights without a copy.
  bool same_storage(const Transformer& other) const;

  // forward_packed runs single-token steps (batch-1 decode; CUDA, bf16/f16, every block fusable)
  // through the fused blocks (DecoderBlock::forward_packed_fused). Default on; the environment
  // variable VELA_FUSED_DECODE=0 sets the default off (A/B measurements), tests flip it directly.
  bool fused_decode = fused_decode_default();
  static bool fused_decode_default();
  // Steps of the wgmma GEMM's rows (3..64 on sm_90, ops::norm_piece_gemms_take) take the fused
  // blocks too, each norm's input handed between the GEMMs in pieces (ops/fused_gemm.h): 4 GEMMs
  // plus attention per layer. Default on; VELA_FUSED_BATCH=0 sets the default off.
  bool fused_batch = fused_batch_default();
  static bool fused_batch_default();

 private:
  // Whether forward_packed of n_tokens takes the fused blocks (see fused_decode, fused_batch).
  bool use_fused_packed(int64_t n_tokens) const;
  // Whether those blocks hand norm pieces between their GEMMs (fused_batch's steps).
  bool use_norm_pieces(int64_t n_tokens) const;
  Tensor rope_table_;  // [max_position_embeddings, rotary_dim] f32
  Tensor logits_from_hidden(const Tensor& hidden) const;
};

}  // namespace vela
