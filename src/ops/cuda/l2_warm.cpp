// L2WarmArgs from an ops::L2Warm hint (ops/cuda/l2_warm.cuh).
#include "ops/cuda/l2_warm.cuh"

#include "core/env.h"

namespace vela::ops::cuda {

L2WarmArgs l2_warm_args(const L2Warm& warm) {
  static const int mode = static_cast<int>(env_int("VELA_L2_WARM_MODE", 0, 0, 2));
  L2WarmArgs a{};
  a.mode = mode;
  for (int r = 0; r < L2Warm::kMaxRanges; ++r) {
    const Tensor& t = warm.ranges[r];
    if (!t.defined() || t.numel() == 0) continue;
    a.ptr[r] = static_cast<const char*>(t.data_ptr());
    a.bytes[r] = t.numel() * static_cast<int64_t>(t.element_size());
  }
  return a;
}

}  // namespace vela::ops::cuda
