// StepTimeline: where the GPU time of an overlapped decode step goes, for A/B work on the part of a
// batch-decode step outside the forward (VELA_TIME_STEP_OPS=1, CUDA engines; off by default and
// then free). The scheduler marks the stream between the step's operations - the request-table
// copies of bind, the sampler's parameter upload, the forward (metadata upload, ids copy, graph),
// the sampling kernels, the tokens' read-back. Means per overlapped step are logged at info
// (VELA_LOG_LEVEL=info) when the scheduler stops. (The gap to the next step is not timed: a run of
// overlapped steps ends with normal ones, so that interval is not an overlapped step's.)
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/device.h"

namespace vela {

namespace cuda {
class StreamEvent;
}

class StepTimeline {
 public:
  // The stream points marked in order within a step; the intervals are between consecutive ones.
  enum Mark { kStart, kBound, kStaged, kForward, kSampled, kDownloaded, kMarks };

  explicit StepTimeline(Device device);  // enabled when VELA_TIME_STEP_OPS=1 on a CUDA device
  ~StepTimeline();
  bool enabled() const { return !slots_.empty(); }
  void mark(Mark m);  // records mark `m` of the current step (kStart opens a new step)
  void log() const;   // means so far, at info

 private:
  struct Slot {
    std::array<std::unique_ptr<cuda::StreamEvent>, kMarks> at;
    bool complete = false;  // every mark recorded for one step (a step that threw midway is not)
  };
  void count(Slot& s);  // a complete step two back (its read-back reached): its intervals

  std::vector<Slot> slots_;  // a ring: a slot is read two steps after it was recorded
  int at_ = -1;              // slot of the current step
  int64_t n_steps_ = 0;      // steps opened
  int64_t n_counted_ = 0;
  std::array<double, kMarks> sum_ms_{};  // [m] = mark m-1 -> m
};

}  // namespace vela
