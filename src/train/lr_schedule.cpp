// Learning-rate schedules; see lr_schedule.h for the shapes and the step convention.
#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace vela {
namespace {

double cosine_between(double hi, double lo, double progress) {
  progress = std::clamp(progress, 0.0, 1.0);
  return lo + (hi - lo) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace

void LrScheduleConfig::validate() const {
  VELA_CHECK(kind == "constant" || kind == "cosine" || kind == "sgdr" || kind == "wsd",
             "lr schedule: unknown kind '", kind, "' (expected constant, cosine, sgdr or wsd)");
  VELA_CHECK(std::isfinite(lr) && lr >= 0, "lr schedule: lr must be finite and >= 0, got ", lr);
  VELA_CHECK(warmup_steps >= 0, "lr schedule: warmup_steps must be >= 0, got ", warmup_steps);
  VELA_CHECK(min_lr_ratio >= 0 && min_lr_ratio <= 1,
             "lr schedule: min_lr_ratio must be in [0, 1], got ", min_lr_ratio);
  if (kind == "cosine" || kind == "wsd") {
    VELA_CHECK(total_steps > warmup_steps, "lr schedule '", kind, "': total_steps (", total_steps,
               ") must be greater than warmup_steps (", warmup_steps, ")");
  }
  if (kind == "sgdr") {
    VELA_CHECK(cycle_steps > 0 || total_steps > warmup_steps,
               "lr schedule 'sgdr': set cycle_steps > 0 (or total_steps > warmup_steps)");
    VELA_CHECK(cycle_mult >= 1.0, "lr schedule 'sgdr': cycle_mult must be >= 1, got ", cycle_mult);
    VELA_CHECK(cycle_decay > 0 && cycle_decay <= 1.0,
               "lr schedule 'sgdr': cycle_decay must be in (0, 1], got ", cycle_decay);
  }
  if (kind == "wsd") {
    VELA_CHECK(decay_shape == "linear" || decay_shape == "cosine" || decay_shape == "sqrt",
               "lr schedule 'wsd': decay_shape must be linear, cosine or sqrt, got '", decay_shape,
               "'");
    VELA_CHECK(decay_steps <= total_steps - warmup_steps, "lr schedule 'wsd': decay_steps (",
               decay_steps, ") longer than the run after warmup (", total_steps - warmup_steps,
               ")");
    VELA_CHECK(decay_steps >= 0 || (decay_fraction >= 0 && decay_fraction <= 1),
               "lr schedule 'wsd': decay_fraction must be in [0, 1], got ", decay_fraction);
  }
}

LrScheduleConfig LrScheduleConfig::from_json(const json& j) {
  VELA_CHECK(j.is_object(), "lr schedule: expected a JSON object, got ", j.dump());
  LrScheduleConfig c;
  for (const auto& [key, value] : j.items()) {
    try {
      if (key == "kind")
        c.kind = value.get<std::string>();
      else if (key == "lr")
        c.lr = value.get<double>();
      else if (key == "warmup_steps")
        c.warmup_steps = value.get<int64_t>();
      else if (key == "total_steps")
        c.total_steps = value.get<int64_t>();
      else if (key == "min_lr_ratio")
        c.min_lr_ratio = value.get<double>();
      else if (key == "cycle_steps")
        c.cycle_steps = value.get<int64_t>();
      else if (key == "cycle_mult")
        c.cycle_mult = value.get<double>();
      else if (key == "cycle_decay")
        c.cycle_decay = value.get<double>();
      else if (key == "decay_steps")
        c.decay_steps = value.get<int64_t>();
      else if (key == "decay_fraction")
        c.decay_fraction = value.get<double>();
      else if (key == "decay_shape")
        c.decay_shape = value.get<std::string>();
      else
        VELA_THROW(InvalidArgument, "lr schedule: unknown key '", key, "'");
    } catch (const json::exception& e) {
      VELA_THROW(InvalidArgument, "lr schedule: bad value for '", key, "': ", value.dump(), " (",
                 e.what(), ")");
    }
  }
  return c;
}

json LrScheduleConfig::to_json() const {
  return json{{"kind", kind},
              {"lr", lr},
              {"warmup_steps", warmup_steps},
              {"total_steps", total_steps},
              {"min_lr_ratio", min_lr_ratio},
              {"cycle_steps", cycle_steps},
              {"cycle_mult", cycle_mult},
              {"cycle_decay", cycle_decay},
              {"decay_steps", decay_steps},
              {"decay_fraction", decay_fraction},
              {"decay_shape", decay_shape}};
}

LrSchedule::LrSchedule(const LrScheduleConfig& config) : config_(config) {
  config_.validate();
  if (config_.kind == "wsd") {
    int64_t span = config_.total_steps - config_.warmup_steps;
    wsd_decay_steps_ = config_.decay_steps >= 0
                           ? config_.decay_steps
                           : static_cast<int64_t>(std::llround(config_.decay_fraction * span));
  }
}

double LrSchedule::lr_at(int64_t step) const {
  const LrScheduleConfig& c = config_;
  const double peak = c.lr;
  const double lo = c.lr * c.min_lr_ratio;
  if (step < 0) step = 0;
  if (step < c.warmup_steps) return peak * static_cast<double>(step + 1) / c.warmup_steps;
  const int64_t t = step - c.warmup_steps;  // steps since the end of warmup
  if (c.kind == "constant") return peak;
  if (c.kind == "cosine") {
    const int64_t span = c.total_steps - c.warmup_steps;
    return cosine_between(peak, lo, static_cast<double>(t) / span);
  }
  if (c.kind == "sgdr") {
    double len =
        static_cast<double>(c.cycle_steps > 0 ? c.cycle_steps : c.total_steps - c.warmup_steps);
    double pos = static_cast<double>(t);
    double cycle_peak = peak;
    // Walk the cycles; lengths grow geometrically so this is O(log t) when cycle_mult > 1.
    while (pos >= len) {
      pos -= len;
      len *= c.cycle_mult;
      cycle_peak *= c.cycle_decay;
    }
    return cosine_between(cycle_peak, std::min(lo, cycle_peak), pos / len);
  }
  // wsd
  const int64_t decay_start = c.total_steps - wsd_decay_steps_;
  if (step < decay_start) return peak;
  if (wsd_decay_steps_ == 0) return step >= c.total_steps ? lo : peak;
  const double p = std::min(1.0, static_cast<double>(step - decay_start) / wsd_decay_steps_);
  double frac;  // remaining fraction of (peak - lo)
  if (c.decay_shape == "linear")
    frac = 1.0 - p;
  else if (c.decay_shape == "cosine")
    frac = 0.5 * (1.0 + std::cos(std::numbers::pi * p));
  else
    frac = 1.0 - std::sqrt(p);
  return lo + (peak - lo) * frac;
}

json LrSchedule::state() const { return json{{"step", step_}, {"kind", config_.kind}}; }

void LrSchedule::load_state(const json& state) {
  VELA_CHECK(state.is_object() && state.contains("step") && state["step"].is_number_integer(),
             "lr schedule state: expected {\"step\": int}, got ", state.dump());
  if (state.contains("kind")) {
    VELA_CHECK(state["kind"] == config_.kind, "lr schedule state was saved by a '",
               state["kind"].get<std::string>(), "' schedule but this run uses '", config_.kind,
               "'");
  }
  step_ = state["step"].get<int64_t>();
  VELA_CHECK(step_ >= 0, "lr schedule state: negative step ", step_);
}

}  // namespace vela
