// The device half of the phase probe (phase_probe.h): thread 0 of a block adds the SM clock to
// the probe row's phase, and at phase 0 counts the block. No state is held between marks, so a
// kernel that never gets a row pays a parameter test per mark.
#pragma once

#include "ops/cuda/phase_probe.h"

namespace vela::ops::cuda {

__device__ __forceinline__ void phase_mark(unsigned long long* row, int phase) {
  if (row == nullptr || threadIdx.x != 0) return;
  atomicAdd(row + phase, static_cast<unsigned long long>(clock64()));
  if (phase == 0) atomicAdd(row + kProbePhases, 1ull);
}

}  // namespace vela::ops::cuda
