// KVCacheView: what one packed inference forward needs to read and write the KV cache. A plain,
// non-owning struct of tensors (int32 metadata) filled by the cache owner — the engine's
// TaskCacheManager::bind, or ContiguousKVCache in tests and `vela generate`.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela {

// How the attention of a packed forward runs (chosen by the engine's executor per step).
enum class AttentionMode : uint8_t {
  kGeneric,  // ops::paged_attention: any batch, any device (CUDA plans from a host copy)
  kDecode,   // one query per sequence: split-KV ops::paged_decode_attention (graph-capturable)
  kPrefill,  // ragged: ops::paged_prefill_attention over a precomputed Q-tile work list
};

struct KVCacheView {
  Tensor k_cache;           // [n_layers, n_slots, n_kv_heads, head_dim]
  Tensor v_cache;           // [n_layers, n_slots, n_kv_heads, head_dim]
  Tensor req_to_token;      // [max_reqs, max_ctx] i32: KV slot of each request position
  Tensor req_pool_indices;  // [n_seqs] i32: request row of each sequence in the batch
  Tensor seq_lens;          // [n_seqs] i32: KV length after this step (new tokens included)
  Tensor qo_indptr;         // [n_seqs + 1] i32: query rows of each sequence in the batch
  Tensor kv_indptr;         // [n_seqs + 1] i32: cumulative seq_lens
  Tensor out_cache_loc;     // [n_tokens] i32: slot each new token's K/V is written to
  int32_t max_len = 0;      // max(seq_lens)

  AttentionMode mode = AttentionMode::kGeneric;
  int32_t n_splits = 1;     // kDecode: KV splits per sequence
  Tensor o_part;            // kDecode: f32 split partials (ops::decode_o_part_numel elements)
  Tensor lse_part;          // kDecode: f32 split log-sum-exps (ops::decode_lse_part_numel)
  Tensor tile_seq_idx;      // kPrefill: [>= n_tiles] i32 sequence of each Q tile
  Tensor tile_q_start;      // kPrefill: [>= n_tiles] i32 first query row of each tile
  int64_t n_tiles = 0;      // kPrefill
  int32_t tile_q = 0;       // kPrefill: query rows per tile of the plan (ops::prefill_tile_q)
  // kPrefill: the first n_decode_seqs sequences have one query row each (a mixed step's decode
  // rows): they run on the split-KV decode kernel (n_splits, o_part, lse_part) and the plan's
  // tiles cover the other sequences.
  int32_t n_decode_seqs = 0;
};

}  // namespace vela
