// L2WarmArgs from an ops::L2Warm hint (ops/cuda/l2_warm.cuh).
#include "ops/cuda/l2_warm.cuh"

#include "core/env.h"

namespace vela::ops::cuda {

int decode_l2_warm_max_keys() {
  // Session 53 (H100), 16 MB of hint: decode8k 1.161-1.173 -> 1.140-1.147 ms, decode32k 1.40 ->
  // 1.61 without the limit.
  static const int keys =
      static_cast<int>(env_int("VELA_DECODE_L2_WARM_MAX_KEYS", 16384, 0, 1 << 30));
  return keys;
}

L2WarmArgs l2_warm_args(const L2Warm& warm) {
  L2WarmArgs a{};
  for (int r = 0; r < L2Warm::kMaxRanges; ++r) {
    const Tensor& t = warm.ranges[r];
    if (!t.defined() || t.numel() == 0) continue;
    a.ptr[r] = static_cast<const char*>(t.data_ptr());
    a.bytes[r] = t.numel() * static_cast<int64_t>(t.element_size());
  }
  return a;
}

}  // namespace vela::ops::cuda
