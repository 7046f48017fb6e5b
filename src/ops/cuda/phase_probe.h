// Phase timing inside kernels (diagnostics): in a build configured with -DVELA_PHASE_PROBE=ON
// (tools/gpu_decode.sh probe) and run with VELA_PHASE_PROBE=1, a kernel given a probe row has
// thread 0 of every block add clock64() at each of its phases into the row (phase_mark,
// phase_probe.cuh), and the block count at phase 0. Every block marks every phase, so
// the difference of two phases' sums is the sum over blocks of the cycles between them (the
// clocks are per SM, and a block's marks are all on one SM). The report (printed to stderr at exit
// when the probe is on) gives each row's mean cycles and microseconds per phase: where a kernel's
// time goes after programmatic dependent launch lets it start early, which CUPTI's start / end
// records cannot show. A kernel may also mark its exit (phase_exit: the latest %globaltimer of the
// row's blocks) and, after its wait, the gap since the last exit of the kind that runs before it
// (phase_gap): the kernel boundary as the dependent sees it, from the predecessor's last block to
// the wait's release. The atomics perturb what they measure a little; never on in a timed run.
#pragma once

#include <cstdint>

namespace vela::ops::cuda {

inline constexpr int kProbePhases = 9;  // marks per kernel (unused ones left 0)
inline constexpr int kProbeRows = 8;    // kernels (kinds) probed
// A row's slots after its phases: the block count, the latest exit (ns), the gaps' sum (ns), their
// count and their minimum (stored inverted, ~gap, so that atomicMax on a zeroed slot keeps it).
inline constexpr int kProbeBlocks = kProbePhases;
inline constexpr int kProbeExit = kProbePhases + 1;
inline constexpr int kProbeGapSum = kProbePhases + 2;
inline constexpr int kProbeGapCount = kProbePhases + 3;
inline constexpr int kProbeGapMinInv = kProbePhases + 4;
inline constexpr int kProbeStride = kProbePhases + 5;
// The buffer starts on this alignment, so a row's address gives its index (phase_probe_index).
inline constexpr int kProbeAlign = 1024;
static_assert(kProbeRows * kProbeStride * 8 <= kProbeAlign, "the rows fit one alignment unit");
// Gaps longer than this (ns) are not counted: the predecessor kind's last run was another step's.
inline constexpr unsigned long long kProbeMaxGapNs = 100000;

// The probe row `row` (0 .. kProbeRows - 1) on the current device, or null when the probe is off
// (not a probe build, or VELA_PHASE_PROBE not 1).
// `kernel` and `phases` (kProbePhases names, "" for unused) label the row in the report; the
// first caller's names stay. `pred`: the row of the kind whose exits the row's gaps are measured
// from (phase_gap), or -1.
unsigned long long* phase_probe_row(int row, const char* kernel, const char* const* phases,
                                    int pred = -1);

}  // namespace vela::ops::cuda
