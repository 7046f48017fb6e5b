// L2Warm: a hint an op may take with it, naming device memory that the ops after it will read (a
// single-row decode layer's next weights). A latency-bound kernel of the op issues L2 prefetches
// for it while DRAM would otherwise sit idle, so the later op finds those bytes in L2 instead of
// waiting on DRAM behind a kernel boundary. Results never depend on it; CPUs ignore it.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela::ops {

struct L2Warm {
  static constexpr int kMaxRanges = 3;
  // Contiguous tensors on the op's device, prefetched in this order (the first read first);
  // undefined entries are skipped.
  Tensor ranges[kMaxRanges];
};

// Throws InvalidArgument when a range is not contiguous or not on ref's device.
void check_l2_warm(const char* op, const Tensor& ref, const L2Warm& warm);

}  // namespace vela::ops
