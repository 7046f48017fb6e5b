// KV pool sizing (see kv_sizing.h).
#include "engine/cache/kv_sizing.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "core/cuda/cuda_api.h"
#include "core/error.h"

namespace vela {

void KvSizingRequest::validate() const {
  VELA_CHECK(kv_pages >= 0, "--kv-pages must be >= 0, got ", kv_pages);
  VELA_CHECK(kv_memory_fraction >= 0 && kv_memory_fraction < 1,
             "--kv-memory-fraction must be in [0, 1), got ", kv_memory_fraction);
  VELA_CHECK(n_kv_slots >= 0, "n_kv_slots must be >= 0, got ", n_kv_slots);
  VELA_CHECK(page_size > 0, "page_size must be positive, got ", page_size);
  const int n_given = (kv_pages > 0) + (kv_memory_fraction > 0) + (n_kv_slots > 0);
  VELA_CHECK(n_given <= 1, "give one of --kv-pages, --kv-memory-fraction (or n_kv_slots), not ",
             n_given);
}

int64_t kv_bytes_per_token(const ModelConfig& c, DType dtype) {
  return 2 * c.n_layers * c.n_kv_heads * c.head_dim * static_cast<int64_t>(dtype_size(dtype));
}

int64_t kv_pool_slots(const KvSizingRequest& req, int64_t bytes_per_token,
                      int64_t available_bytes) {
  req.validate();
  VELA_CHECK(bytes_per_token > 0, "kv_pool_slots: bytes_per_token must be positive");
  const int64_t page = req.page_size;
  auto round_up = [&](int64_t n) { return (n + page - 1) / page * page; };
  if (req.kv_pages > 0) return req.kv_pages * page;
  if (req.n_kv_slots > 0) return round_up(req.n_kv_slots);
  if (req.kv_memory_fraction > 0) {
    const double budget =
        req.kv_memory_fraction * static_cast<double>(std::max<int64_t>(0, available_bytes));
    const int64_t slots = static_cast<int64_t>(budget) / bytes_per_token / page * page;
    VELA_CHECK_T(OutOfMemory, slots >= page, "--kv-memory-fraction ", req.kv_memory_fraction,
                 " of ", available_bytes / (1 << 20),
                 " MiB available leaves no room for one KV page (", bytes_per_token * page / 1024,
                 " KiB)");
    return slots;
  }
  VELA_CHECK(req.default_slots > 0, "kv_pool_slots: no size given and no default");
  return round_up(req.default_slots);
}

int64_t available_memory_bytes(Device device, int64_t reserve_bytes) {
  int64_t bytes = 0;
  if (device.is_cpu()) {
    std::ifstream f("/proc/meminfo");
    std::string key, unit;
    int64_t kb = -1;
    while (f >> key >> kb >> unit)
      if (key == "MemAvailable:") break;
    VELA_CHECK_T(IoError, key == "MemAvailable:" && kb >= 0,
                 "cannot read MemAvailable from /proc/meminfo (needed by --kv-memory-fraction)");
    bytes = kb * 1024;
  } else {
    bytes = static_cast<int64_t>(cuda::device_free_bytes(device.index));
  }
  return std::max<int64_t>(0, bytes - reserve_bytes);
}

}  // namespace vela
