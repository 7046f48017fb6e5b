// L2WarmArgs from an ops::L2Warm hint (ops/cuda/l2_warm.cuh).
#include "ops/cuda/l2_warm.cuh"

#include "core/env.h"

namespace vela::ops::cuda {

L2WarmArgs l2_warm_args(const L2Warm& warm) {
  static const int mode = static_cast<int>(env_int("VELA_L2_WARM_MODE", 0, 0, 2));
  L2WarmArgs a{};
  a.mode = mode;
  for (int i = 0; i < L2Warm::kMaxRanges; ++i) {
    const Tensor& t = warm.ranges[i];
    if (!t.defined() || t.numel() == 0) continue;
    const int64_t es = static_cast<int64_t>(t.element_size());
    const bool flat = t.dim() == 1;
    a.r[i] = {static_cast<const char*>(t.data_ptr()), flat ? 1 : t.size(0),
              (flat ? t.numel() : t.size(1)) * es, flat ? 0 : t.stride(0) * es};
  }
  return a;
}

}  // namespace vela::ops::cuda
