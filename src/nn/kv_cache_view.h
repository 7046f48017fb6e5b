// KVCacheView: what one packed inference forward needs to read and write the KV cache. A plain,
// non-owning struct of tensors (int32 metadata) filled by the cache owner — the engine's
// TaskCacheManager::bind, or ContiguousKVCache in tests and `vela generate`.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela {

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
};

}  // namespace vela
