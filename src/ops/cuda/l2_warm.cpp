// L2WarmArgs from an ops::L2Warm hint (ops/cuda/l2_warm.cuh).
#include "ops/cuda/l2_warm.cuh"

namespace vela::ops::cuda {

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
