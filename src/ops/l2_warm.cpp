// L2Warm's argument check (ops/l2_warm.h).
#include "ops/l2_warm.h"

#include "core/error.h"

namespace vela::ops {

void check_l2_warm(const char* op, const Tensor& ref, const L2Warm& warm) {
  for (const Tensor& t : warm.ranges) {
    if (!t.defined()) continue;
    VELA_CHECK(t.is_contiguous(), op, ": an L2 warm range must be contiguous, got ", t.str());
    VELA_CHECK(t.device() == ref.device(), op, ": L2 warm range ", t.str(), " is on ",
               t.device().str(), " but the op runs on ", ref.device().str());
  }
}

}  // namespace vela::ops
