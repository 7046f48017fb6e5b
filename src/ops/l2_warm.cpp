// L2Warm's argument check (ops/l2_warm.h).
#include "ops/l2_warm.h"

#include "core/error.h"

namespace vela::ops {

void check_l2_warm(const char* op, const Tensor& ref, const L2Warm& warm) {
  for (const Tensor& t : warm.ranges) {
    if (!t.defined()) continue;
    VELA_CHECK(t.dim() == 1 ? t.is_contiguous() : t.dim() == 2 && t.stride(1) == 1, op,
               ": an L2 warm range must be 1-D contiguous or 2-D with contiguous rows, got ",
               t.str());
    VELA_CHECK(t.device() == ref.device(), op, ": L2 warm range ", t.str(), " is on ",
               t.device().str(), " but the op runs on ", ref.device().str());
  }
}

}  // namespace vela::ops
