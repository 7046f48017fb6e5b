// KVStorage: the physical K/V buffers of the inference engine — one allocation each for K and V,
// [n_layers, n_slots, n_kv_heads, head_dim], so a layer is `k.select(0, layer)` and a token slot is
// a single advanced index into it (no per-layer copies). Slots are handed out by an
// AllocationStrategy; this class only owns the bytes. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"
#include "model/model_config.h"

namespace vela {

class KVStorage {
 public:
  // `n_reserved` extra slots follow the n_slots the strategies hand out; the engine writes the K/V of
  // padding rows (a CUDA graph's unused batch rows) into one of them.
  KVStorage(int64_t n_layers, int64_t n_slots, int64_t n_kv_heads, int64_t head_dim, DType dtype,
            Device device, int64_t n_reserved = 0);
  // Sized for `config`'s layers and KV heads.
  static KVStorage for_model(const ModelConfig& config, int64_t n_slots, DType dtype,
                             Device device);

  Tensor k;  // [n_layers, n_slots + n_reserved, n_kv_heads, head_dim]
  Tensor v;  // [n_layers, n_slots + n_reserved, n_kv_heads, head_dim]

  int64_t n_layers() const { return k.size(0); }
  int64_t n_slots() const { return n_slots_; }  // slots the allocation strategies manage
  // The first reserved slot (a write-only sink for padding rows); requires n_reserved >= 1.
  int32_t padding_slot() const { return static_cast<int32_t>(n_slots_); }
  int64_t n_kv_heads() const { return k.size(2); }
  int64_t head_dim() const { return k.size(3); }
  DType dtype() const { return k.dtype(); }
  Device device() const { return k.device(); }
  size_t nbytes() const { return k.nbytes() + v.nbytes(); }

  // Bytes one token slot costs across all layers, K and V together.
  static size_t bytes_per_slot(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, DType dtype);
  // The most slots that fit in `budget_bytes`.
  static int64_t slots_for_budget(size_t budget_bytes, int64_t n_layers, int64_t n_kv_heads,
                                  int64_t head_dim, DType dtype);

 private:
  int64_t n_slots_ = 0;
};

}  // namespace vela
