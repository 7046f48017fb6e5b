// Phase timing inside kernels (diagnostics): in a build configured with -DVELA_PHASE_PROBE=ON
// (tools/gpu_decode.sh probe) and run with VELA_PHASE_PROBE=1, a kernel given a probe row has
// thread 0 of every block add clock64() at each of its phases into the row (phase_mark,
// phase_probe.cuh), and the block count at phase 0. Every block marks every phase, so
// the difference of two phases' sums is the sum over blocks of the cycles between them (the
// clocks are per SM, and a block's marks are all on one SM). The report (printed to stderr at exit
// when the probe is on) gives each row's mean cycles and microseconds per phase: where a kernel's
// time goes after programmatic dependent launch lets it start early, which CUPTI's start / end
// records cannot show. The atomics perturb what they measure a little; never on in a timed run.
#pragma once

#include <cstdint>

namespace vela::ops::cuda {

inline constexpr int kProbePhases = 9;                 // marks per kernel (unused ones left 0)
inline constexpr int kProbeRows = 8;                   // kernels (kinds) probed
inline constexpr int kProbeStride = kProbePhases + 1;  // + the block count

// The probe row `row` (0 .. kProbeRows - 1) on the current device, or null when the probe is off
// (not a probe build, or VELA_PHASE_PROBE not 1).
// `kernel` and `phases` (kProbePhases names, "" for unused) label the row in the report; the
// first caller's names stay.
unsigned long long* phase_probe_row(int row, const char* kernel, const char* const* phases);

}  // namespace vela::ops::cuda
