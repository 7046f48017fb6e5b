// ContiguousKVCache: the simplest KV cache — sequence s owns slots [s * max_ctx, (s + 1) * max_ctx).
// Used by model tests and `vela generate`; the engine's paged TaskCacheManager produces the same
// KVCacheView. Not thread-safe.
#pragma once

#include <vector>

#include "model/model_config.h"
#include "nn/kv_cache_view.h"

namespace vela {

struct PackedStep {
  KVCacheView kv;
  Tensor positions;       // [n_tokens] i32
  Tensor last_indices;    // [n_seqs] i32: each sequence's last row in the packed batch
};

class ContiguousKVCache {
 public:
  ContiguousKVCache(const ModelConfig& config, int64_t n_seqs, int64_t max_ctx, DType dtype,
                    Device device);

  // A step in which each sequence seqs[i] appends n_new[i] tokens (packed in that order). The
  // lengths advance immediately; the returned view covers old + new tokens.
  PackedStep step(const std::vector<int32_t>& seqs, const std::vector<int32_t>& n_new);
  int32_t length(int32_t seq) const { return lens_.at(static_cast<size_t>(seq)); }
  void reset(int32_t seq) { lens_.at(static_cast<size_t>(seq)) = 0; }
  int64_t max_ctx() const { return max_ctx_; }

 private:
  Tensor k_, v_;           // [n_layers, n_seqs * max_ctx, n_kv_heads, head_dim]
  Tensor req_to_token_;    // [n_seqs, max_ctx] i32
  std::vector<int32_t> lens_;
  int64_t max_ctx_;
  Device device_;
};

}  // namespace vela
