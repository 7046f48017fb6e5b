// L2 warming from inside a kernel (ops/l2_warm.h): a latency-bound kernel spreads prefetches of
// the byte ranges the ops after it read over its threads, so those bytes come from DRAM while the
// step's dependent chain would leave it idle. How the prefetches are issued is an A/B knob,
// VELA_L2_WARM_MODE (read once): 0 = prefetch.global.L2 per 128-byte line (the default), 1 = per
// 32-byte sector, 2 = cp.async.bulk.prefetch.L2 of 4 KiB per instruction (sm_90).
#pragma once

#include <cstdint>

#include "ops/l2_warm.h"

namespace vela::ops::cuda {

struct L2WarmArgs {
  const char* ptr[L2Warm::kMaxRanges];
  int64_t bytes[L2Warm::kMaxRanges];
  int mode;  // VELA_L2_WARM_MODE
};

// The kernel arguments of a hint (undefined ranges: zero bytes).
L2WarmArgs l2_warm_args(const L2Warm& warm);

#ifdef __CUDACC__
// Thread t of n_threads (across the grid) issues its share of the prefetches, ranges in order.
// Only a hint: nothing waits for it and nothing it reads is used.
__device__ __forceinline__ void warm_l2(const L2WarmArgs& w, int64_t t, int64_t n_threads) {
  const uint64_t unit = w.mode == 1 ? 32 : w.mode == 2 ? 4096 : 128;
#pragma unroll
  for (int r = 0; r < L2Warm::kMaxRanges; ++r) {
    if (w.bytes[r] <= 0) continue;
    const uint64_t start = reinterpret_cast<uint64_t>(w.ptr[r]);
    const uint64_t end = start + static_cast<uint64_t>(w.bytes[r]);
    // Units are aligned to their size; the first one starts at or before the range.
    for (uint64_t a = (start & ~(unit - 1)) + static_cast<uint64_t>(t) * unit; a < end;
         a += static_cast<uint64_t>(n_threads) * unit) {
      const uint64_t lo = a < start ? start : a;
      if (w.mode == 2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        // A bulk prefetch takes a 16-byte aligned address and a multiple of 16 bytes.
        const uint64_t lo16 = (lo + 15) & ~uint64_t{15};
        const uint64_t hi16 = (a + unit < end ? a + unit : end) & ~uint64_t{15};
        if (hi16 > lo16)
          asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(lo16),
                       "r"(static_cast<uint32_t>(hi16 - lo16))
                       : "memory");
#endif
      } else {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(lo));
      }
    }
  }
}
#endif

}  // namespace vela::ops::cuda
