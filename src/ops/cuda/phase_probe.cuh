// The device half of the phase probe (phase_probe.h): in a probe build (VELA_PHASE_PROBE), thread
// 0 of a block adds the SM clock to the probe row's phase, and at phase 0 counts the block; no
// state is held between marks. In every other build a mark is nothing at all, so the kernels
// compile exactly as without it (a tree with the marks compiled in, null rows, read bench-1b's
// batch-64 step ~0.9% slower on an H100 in session 54).
#pragma once

#include "ops/cuda/phase_probe.h"

namespace vela::ops::cuda {

__device__ __forceinline__ void phase_mark(unsigned long long* row, int phase) {
#if defined(VELA_PHASE_PROBE)
  if (row == nullptr || threadIdx.x != 0) return;
  atomicAdd(row + phase, static_cast<unsigned long long>(clock64()));
  if (phase == 0) atomicAdd(row + kProbePhases, 1ull);
#else
  (void)row, (void)phase;
#endif
}

}  // namespace vela::ops::cuda
