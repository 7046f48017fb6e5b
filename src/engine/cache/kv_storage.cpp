// KVStorage: allocation and sizing of the K/V buffers.
#include "engine/cache/kv_storage.h"

namespace vela {

KVStorage::KVStorage(int64_t n_layers, int64_t n_slots, int64_t n_kv_heads, int64_t head_dim,
                     DType dtype, Device device, int64_t n_reserved)
    : n_slots_(n_slots) {
  VELA_CHECK(n_layers > 0 && n_slots > 0 && n_kv_heads > 0 && head_dim > 0,
             "KVStorage: n_layers, n_slots, n_kv_heads and head_dim must be positive (got ",
             n_layers, ", ", n_slots, ", ", n_kv_heads, ", ", head_dim, ")");
  VELA_CHECK(is_floating(dtype), "KVStorage: dtype must be f32, bf16 or f16, got ",
             dtype_name(dtype));
  VELA_CHECK(n_reserved >= 0 && n_slots + n_reserved <= INT32_MAX, "KVStorage: ",
             n_slots + n_reserved, " slots do not fit int32 indices");
  // Zeroed so a slot read before it is written (a bug) gives finite values, not garbage.
  k = Tensor::zeros({n_layers, n_slots + n_reserved, n_kv_heads, head_dim}, dtype, device);
  v = Tensor::zeros({n_layers, n_slots + n_reserved, n_kv_heads, head_dim}, dtype, device);
}

KVStorage KVStorage::for_model(const ModelConfig& c, int64_t n_slots, DType dtype, Device device) {
  return KVStorage(c.n_layers, n_slots, c.n_kv_heads, c.head_dim, dtype, device);
}

size_t KVStorage::bytes_per_slot(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim,
                                 DType dtype) {
  return 2 * static_cast<size_t>(n_layers * n_kv_heads * head_dim) * dtype_size(dtype);
}

int64_t KVStorage::slots_for_budget(size_t budget_bytes, int64_t n_layers, int64_t n_kv_heads,
                                    int64_t head_dim, DType dtype) {
  size_t per_slot = bytes_per_slot(n_layers, n_kv_heads, head_dim, dtype);
  VELA_CHECK(per_slot > 0, "KVStorage::slots_for_budget: empty slot shape");
  return static_cast<int64_t>(budget_bytes / per_slot);
}

}  // namespace vela
