// L2 warming from inside a kernel (ops/l2_warm.h): a latency-bound kernel spreads prefetches of
// the byte ranges the ops after it read over its threads (prefetch.global.L2, one per 128-byte
// line), so those bytes come from DRAM while the step's dependent chain would leave it idle.
// Session 53 also tried one prefetch per 32-byte sector (much slower) and 4 KiB bulk prefetches
// (cp.async.bulk.prefetch.L2, no better): bench/results/decode_l2_warm_h100.txt.
#pragma once

#include <cstdint>

#include "ops/l2_warm.h"

namespace vela::ops::cuda {

struct L2WarmArgs {
  const char* ptr[L2Warm::kMaxRanges];
  int64_t bytes[L2Warm::kMaxRanges];
};

// The kernel arguments of a hint (undefined ranges: zero bytes).
L2WarmArgs l2_warm_args(const L2Warm& warm);

#ifdef __CUDACC__
// Thread t of n_threads (across the grid) issues its share of the prefetches, ranges in order.
// Only a hint: nothing waits for it and nothing it reads is used.
__device__ __forceinline__ void warm_l2(const L2WarmArgs& w, int64_t t, int64_t n_threads) {
  constexpr uint64_t kLine = 128;
#pragma unroll
  for (int r = 0; r < L2Warm::kMaxRanges; ++r) {
    if (w.bytes[r] <= 0) continue;
    const uint64_t start = reinterpret_cast<uint64_t>(w.ptr[r]);
    const uint64_t end = start + static_cast<uint64_t>(w.bytes[r]);
    // Lines are aligned; the first one starts at or before the range.
    for (uint64_t a = (start & ~(kLine - 1)) + static_cast<uint64_t>(t) * kLine; a < end;
         a += static_cast<uint64_t>(n_threads) * kLine)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(a < start ? start : a));
  }
}
#endif

}  // namespace vela::ops::cuda
