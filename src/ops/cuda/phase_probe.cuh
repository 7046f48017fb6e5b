// The device half of the phase probe (phase_probe.h): in a probe build (VELA_PHASE_PROBE), thread
// 0 of a block adds the SM clock to the probe row's phase, and at phase 0 counts the block; no
// state is held between marks. phase_exit / phase_gap time the boundary to the kernel before. In
// every other build a mark is nothing at all, so the kernels compile exactly as without it (a tree
// with the marks compiled in, null rows, read bench-1b's batch-64 step ~0.9% slower on an H100 in
// session 54).
#pragma once

#include "ops/cuda/phase_probe.h"

namespace vela::ops::cuda {

__device__ __forceinline__ void phase_mark(unsigned long long* row, int phase) {
#if defined(VELA_PHASE_PROBE)
  if (row == nullptr || threadIdx.x != 0) return;
  atomicAdd(row + phase, static_cast<unsigned long long>(clock64()));
  if (phase == 0) atomicAdd(row + kProbeBlocks, 1ull);
#else
  (void)row, (void)phase;
#endif
}

#if defined(VELA_PHASE_PROBE)
__device__ __forceinline__ unsigned long long probe_global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

// The index of `row` in the probe buffer (0 when not a probe build or row is null).
__device__ __forceinline__ int phase_probe_index(const unsigned long long* row) {
#if defined(VELA_PHASE_PROBE)
  if (row == nullptr) return 0;
  return static_cast<int>((reinterpret_cast<uintptr_t>(row) & (kProbeAlign - 1)) /
                          (kProbeStride * sizeof(unsigned long long)));
#else
  (void)row;
  return 0;
#endif
}

// Thread 0 records the block's exit time (the row's latest).
__device__ __forceinline__ void phase_exit(unsigned long long* row) {
#if defined(VELA_PHASE_PROBE)
  if (row == nullptr || threadIdx.x != 0) return;
  atomicMax(row + kProbeExit, probe_global_ns());
#else
  (void)row;
#endif
}

// Right after the block's wait: thread 0 adds the time since the latest exit of row `pred`'s
// kind (the kernel before this one in the stream, complete once the wait returns) to the row's
// gaps, unless that was more than kProbeMaxGapNs ago (another step's run) or never.
__device__ __forceinline__ void phase_gap(unsigned long long* row, int pred) {
#if defined(VELA_PHASE_PROBE)
  if (row == nullptr || pred < 0 || threadIdx.x != 0) return;
  auto* base = reinterpret_cast<unsigned long long*>(reinterpret_cast<uintptr_t>(row) &
                                                     ~static_cast<uintptr_t>(kProbeAlign - 1));
  const unsigned long long exit =
      *reinterpret_cast<volatile unsigned long long*>(base + pred * kProbeStride + kProbeExit);
  const unsigned long long now = probe_global_ns();
  if (exit == 0 || now < exit || now - exit > kProbeMaxGapNs) return;
  atomicAdd(row + kProbeGapSum, now - exit);
  atomicAdd(row + kProbeGapCount, 1ull);
  atomicMax(row + kProbeGapMinInv, ~(now - exit));
#else
  (void)row, (void)pred;
#endif
}

}  // namespace vela::ops::cuda
