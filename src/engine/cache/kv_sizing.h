// KV pool sizing: how many token slots the engine's KVStorage holds, from what the user asked for
// (`--kv-pages N`, `--kv-memory-fraction F`, or neither) and the memory there is. One place for
// `vela serve`, `vela generate` and `vela bench engine` (all set EngineConfig::kv_pages /
// kv_memory_fraction; the Engine calls this once the weights are loaded). Pure functions apart
// from available_memory_bytes(); everything throws InvalidArgument naming the flag at fault.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "model/model_config.h"

namespace vela {

struct KvSizingRequest {
  int64_t kv_pages = 0;           // pool size in pages (0 = not given)
  double kv_memory_fraction = 0;  // pool = F x the memory available for it (0 = not given)
  int64_t n_kv_slots = 0;         // pool size in tokens, set directly (0 = not given; library use)
  int32_t page_size = 16;         // tokens per page (1 for the contiguous strategy)
  int64_t default_slots = 0;      // what the engine uses when nothing is given
  void validate() const;          // ranges; at most one of the three sizes
};

// Bytes one token costs in the pool: K and V of every layer.
int64_t kv_bytes_per_token(const ModelConfig& config, DType dtype);

// Token slots for `req` (a multiple of page_size), given the bytes a memory fraction applies to
// (`available_bytes`: see available_memory_bytes) and the per-token cost. Throws when a fraction
// leaves room for no page.
int64_t kv_pool_slots(const KvSizingRequest& req, int64_t bytes_per_token, int64_t available_bytes);

// The memory a fraction is taken of: on the host, MemAvailable (/proc/meminfo); on a GPU, the
// device's free memory now (driver free + what vela's caching allocator holds unused) less
// `reserve_bytes` that the engine allocates after the pool (activation arena, workspace).
int64_t available_memory_bytes(Device device, int64_t reserve_bytes);

}  // namespace vela
