// StepTimes: how long the engine's steps take (wall clock, plan to events), split by what a step
// carried: decode rows only, decode rows plus prompt chunks (mixed), or prompt chunks only. Every
// decode row waits for its whole step, so the mixed steps' tail is the inter-token latency tail a
// serving client sees. Fixed log-spaced buckets (5% wide, 20 us .. ~60 s): observing is O(1) and
// the struct copies into EngineStats snapshots without allocating; percentiles are bucket upper
// edges (never above the exact max). StepPhases splits the same wall time by what the loop thread
// was doing (schedule, bind, launch, ... ; below).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace vela {

class StepTimeHistogram {
 public:
  static constexpr int kBuckets = 306;
  static constexpr double kFirst = 20e-6, kRatio = 1.05;

  void observe(double seconds) {
    seconds = std::max(0.0, seconds);
    int b = seconds <= kFirst ? 0
                              : static_cast<int>(std::ceil(std::log(seconds / kFirst) /
                                                           std::log(kRatio) - 1e-9));
    ++counts_[static_cast<size_t>(std::clamp(b, 0, kBuckets - 1))];
    ++count_;
    sum_ += seconds;
    max_ = std::max(max_, seconds);
  }
  int64_t count() const { return count_; }
  double sum() const { return sum_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  double max() const { return max_; }
  // The q-quantile (0 < q <= 1) as its bucket's upper edge, capped at max(); 0 when empty.
  double quantile(double q) const {
    if (count_ == 0) return 0;
    const auto rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(count_)));
    int64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts_[static_cast<size_t>(b)];
      if (seen < std::max<int64_t>(rank, 1)) continue;
      if (b == kBuckets - 1) return max_;  // the overflow bucket has no upper edge
      return std::min(max_, kFirst * std::pow(kRatio, static_cast<double>(b)));
    }
    return max_;
  }

 private:
  std::array<uint32_t, kBuckets> counts_{};
  int64_t count_ = 0;
  double sum_ = 0, max_ = 0;
};

struct StepTimes {
  StepTimeHistogram decode;   // decode rows only (speculative verify rows included)
  StepTimeHistogram mixed;    // decode rows and prompt chunks in one forward
  StepTimeHistogram prefill;  // prompt chunks only
};

// StepPhases: where a step's wall time goes on the loop thread, summed over steps of one kind.
// On CUDA the GPU idles from the end of `sample` (which waits for the forward) to the next step's
// `launch`: process, finish, between, schedule and bind are the host work a step adds to it.
struct StepPhases {
  enum Phase {
    kSchedule,  // inbox, cancellations, admission, the plan (and drafts)
    kBind,      // wait for the last upload, bind the batch, pack the token ids
    kLaunch,    // enqueue the forward (metadata upload, graph replay or eager kernels)
    kPublish,   // push the last step's token events to the streams
    kSample,    // mask, sample, copy the tokens back: waits for the forward on CUDA
    kProcess,   // per sampled row: stop checks, detokenization, events
    kFinish,    // stats, final events (counted with the next step of the engine)
    kBetween,   // from the previous step's end to this one's start (loop, gate; not idle turns)
    kCount
  };
  static constexpr const char* kNames[kCount] = {"schedule", "bind",   "launch", "publish",
                                                 "sample",   "process", "finish", "between"};
  int64_t steps = 0;
  std::array<double, kCount> seconds{};  // summed over the steps
};

}  // namespace vela
