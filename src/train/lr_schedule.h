// LrSchedule: the learning rate as a function of the optimizer step, for the shapes trainers use:
//   constant  warmup, then the peak lr
//   cosine    warmup, then a half cosine from peak to min over the remaining steps to total_steps
//   sgdr      warmup, then cosine cycles with warm restarts (Loshchilov & Hutter 2017): the first
//             cycle lasts cycle_steps, each next one cycle_mult times longer, each restart's peak
//             is the previous one times cycle_decay
//   wsd       warmup-stable-decay: warmup, the peak until the last decay_steps of total_steps,
//             then a decay to min (linear, cosine or 1-sqrt)
// Conventions: `step` is the 0-based index of the optimizer update about to be applied. Linear
// warmup gives lr * (step + 1) / warmup_steps for step < warmup_steps, so the peak is reached at
// step warmup_steps - 1. min lr = lr * min_lr_ratio; past total_steps the schedule stays at min
// (sgdr keeps cycling). The schedule's whole state is its step counter (state()/load_state()).
#pragma once

#include <cstdint>
#include <string>

#include "core/json.h"

namespace vela {

struct LrScheduleConfig {
  std::string kind = "cosine";  // constant | cosine | sgdr | wsd
  double lr = 3e-4;             // peak learning rate
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;      // cosine and wsd: the step at which min lr is reached
  double min_lr_ratio = 0.1;    // min lr = lr * min_lr_ratio
  int64_t cycle_steps = 0;      // sgdr: length of the first cycle (0: total_steps - warmup_steps)
  double cycle_mult = 1.0;      // sgdr: each cycle is this many times longer than the last (>= 1)
  double cycle_decay = 1.0;     // sgdr: each restart's peak is this times the previous one
  int64_t decay_steps = -1;     // wsd: length of the decay phase (-1: decay_fraction of the run)
  double decay_fraction = 0.2;  // wsd: used when decay_steps < 0, of (total_steps - warmup_steps)
  std::string decay_shape = "linear";  // wsd: linear | cosine | sqrt (1 - sqrt(progress))

  // Throws InvalidArgument naming the bad field.
  void validate() const;
  static LrScheduleConfig from_json(const json& j);  // unknown keys are an error
  json to_json() const;
};

class LrSchedule {
 public:
  explicit LrSchedule(const LrScheduleConfig& config);

  double lr_at(int64_t step) const;           // pure function of the step
  double lr() const { return lr_at(step_); }  // for the update about to be applied
  void advance() { ++step_; }                 // after each optimizer step
  int64_t step() const { return step_; }
  const LrScheduleConfig& config() const { return config_; }

  json state() const;                  // {"step": n, "kind": ...}
  void load_state(const json& state);  // a different kind is an InvalidArgument

 private:
  LrScheduleConfig config_;
  int64_t step_ = 0;
  int64_t wsd_decay_steps_ = 0;
};

}  // namespace vela
