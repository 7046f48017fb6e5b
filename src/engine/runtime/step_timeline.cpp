// StepTimeline (see step_timeline.h).
#include "engine/runtime/step_timeline.h"

#include "core/cuda/cuda_api.h"
#include "core/env.h"
#include "core/log.h"

namespace vela {

namespace {
constexpr int kSlots = 4;  // steps in flight <= 2: the slot two steps back is complete
}  // namespace

StepTimeline::StepTimeline(Device device) {
  if (!device.is_cuda() || !env_opted_in("VELA_TIME_STEP_OPS")) return;
  slots_.resize(kSlots);
  for (Slot& s : slots_)
    for (auto& e : s.at) e = std::make_unique<cuda::StreamEvent>(device.index, /*timing=*/true);
}

StepTimeline::~StepTimeline() {
  if (enabled()) log();
}

void StepTimeline::mark(Mark m) {
  if (!enabled()) return;
  if (m == kStart) {
    // The step two back has been read (its read-back reached) once this one can start: count it
    // before its slot is reused.
    if (n_steps_ >= 2) count(slots_[static_cast<size_t>((at_ + kSlots - 1) % kSlots)]);
    at_ = (at_ + 1) % kSlots;
    ++n_steps_;
    slots_[static_cast<size_t>(at_)].complete = false;
  }
  Slot& s = slots_[static_cast<size_t>(at_)];
  s.at[static_cast<size_t>(m)]->record();
  if (m == kDownloaded) s.complete = true;
}

void StepTimeline::count(Slot& s) {
  if (!s.complete) return;
  s.complete = false;  // counted once
  s.at[kDownloaded]->synchronize();
  for (int m = 1; m < kMarks; ++m)
    sum_ms_[static_cast<size_t>(m)] += cuda::StreamEvent::elapsed_ms(
        *s.at[static_cast<size_t>(m - 1)], *s.at[static_cast<size_t>(m)]);
  ++n_counted_;
}

void StepTimeline::log() const {
  if (n_counted_ == 0) return;
  const double n = static_cast<double>(n_counted_);
  VELA_LOG_INFO("[scheduler] overlapped step on the GPU, mean us over ", n_counted_,
                " steps: bind copies ", 1e3 * sum_ms_[kBound] / n, ", sampler upload ",
                1e3 * sum_ms_[kStaged] / n, ", forward ", 1e3 * sum_ms_[kForward] / n,
                ", sampling ", 1e3 * sum_ms_[kSampled] / n, ", read-back ",
                1e3 * sum_ms_[kDownloaded] / n);
}

}  // namespace vela
