// LR schedules: exact values at the boundary steps (end of warmup, decay start, restarts, the last
// step), state round trip and config validation.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "train/lr_schedule.h"

namespace vela {
namespace {

LrScheduleConfig make(const std::string& kind, int64_t warmup, int64_t total) {
  LrScheduleConfig c;
  c.kind = kind;
  c.lr = 1.0;
  c.warmup_steps = warmup;
  c.total_steps = total;
  c.min_lr_ratio = 0.1;
  return c;
}

TEST(LrSchedule, WarmupIsLinearToPeak) {
  LrSchedule s(make("constant", 4, 0));
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 0.5);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(1000), 1.0);
}

TEST(LrSchedule, CosineBoundaries) {
  LrSchedule s(make("cosine", 10, 110));
  EXPECT_DOUBLE_EQ(s.lr_at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1.0);     // decay starts at the peak
  EXPECT_NEAR(s.lr_at(60), 0.55, 1e-15);  // halfway: (peak + min) / 2
  EXPECT_NEAR(s.lr_at(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)), 1e-15);
  EXPECT_NEAR(s.lr_at(110), 0.1, 1e-15);  // min at total_steps
  EXPECT_NEAR(s.lr_at(500), 0.1, 1e-15);  // and after
  LrSchedule no_warmup(make("cosine", 0, 100));
  EXPECT_DOUBLE_EQ(no_warmup.lr_at(0), 1.0);
}

TEST(LrSchedule, SgdrRestartsWithGrowingCycles) {
  LrScheduleConfig c = make("sgdr", 2, 0);
  c.cycle_steps = 10;
  c.cycle_mult = 2.0;
  c.cycle_decay = 0.5;
  LrSchedule s(c);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 1.0);     // cycle 0 starts (len 10)
  EXPECT_NEAR(s.lr_at(7), 0.55, 1e-15);  // its middle
  EXPECT_NEAR(s.lr_at(11), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.9)), 1e-15);
  EXPECT_DOUBLE_EQ(s.lr_at(12), 0.5);    // restart: cycle 1 (len 20), peak halved
  EXPECT_NEAR(s.lr_at(22), 0.3, 1e-15);  // its middle: (0.5 + 0.1) / 2
  EXPECT_DOUBLE_EQ(s.lr_at(32), 0.25);   // cycle 2 (len 40)
}

TEST(LrSchedule, WsdStableThenDecay) {
  LrScheduleConfig c = make("wsd", 10, 110);
  c.decay_steps = 20;  // decay over steps 90..110
  LrSchedule lin(c);
  EXPECT_DOUBLE_EQ(lin.lr_at(10), 1.0);
  EXPECT_DOUBLE_EQ(lin.lr_at(89), 1.0);
  EXPECT_DOUBLE_EQ(lin.lr_at(90), 1.0);  // decay starts at the peak
  EXPECT_NEAR(lin.lr_at(100), 0.55, 1e-15);
  EXPECT_NEAR(lin.lr_at(110), 0.1, 1e-15);
  EXPECT_NEAR(lin.lr_at(200), 0.1, 1e-15);
  c.decay_shape = "sqrt";
  EXPECT_NEAR(LrSchedule(c).lr_at(95), 0.1 + 0.9 * (1 - std::sqrt(0.25)), 1e-15);
  c.decay_shape = "cosine";
  EXPECT_NEAR(LrSchedule(c).lr_at(100), 0.55, 1e-15);
  c.decay_steps = -1;  // decay_fraction 0.2 of 100 steps = 20: the same schedule
  c.decay_shape = "linear";
  EXPECT_NEAR(LrSchedule(c).lr_at(100), 0.55, 1e-15);
}

TEST(LrSchedule, StateRoundTrip) {
  LrSchedule a(make("cosine", 5, 50));
  for (int i = 0; i < 17; ++i) a.advance();
  LrSchedule b(make("cosine", 5, 50));
  b.load_state(json::parse(a.state().dump()));
  EXPECT_EQ(b.step(), 17);
  EXPECT_EQ(b.lr(), a.lr());
  LrSchedule other(make("wsd", 5, 50));
  EXPECT_THROW(other.load_state(a.state()), InvalidArgument);
  EXPECT_THROW(b.load_state(json{{"stp", 3}}), InvalidArgument);
}

TEST(LrSchedule, BadConfigsAreErrors) {
  EXPECT_THROW(LrSchedule(make("linear", 0, 10)), InvalidArgument);
  EXPECT_THROW(LrSchedule(make("cosine", 10, 10)), InvalidArgument);  // nothing after warmup
  LrScheduleConfig c = make("sgdr", 0, 0);
  EXPECT_THROW(LrSchedule{c}, InvalidArgument);  // no cycle length
  c.cycle_steps = 5;
  c.cycle_mult = 0.5;
  EXPECT_THROW(LrSchedule{c}, InvalidArgument);
  EXPECT_THROW(LrScheduleConfig::from_json(json{{"kindd", "cosine"}}), InvalidArgument);
  EXPECT_THROW(LrScheduleConfig::from_json(json{{"lr", "big"}}), InvalidArgument);
  LrScheduleConfig parsed = LrScheduleConfig::from_json(json{{"kind", "wsd"}, {"total_steps", 9}});
  EXPECT_EQ(parsed.kind, "wsd");
  EXPECT_EQ(parsed.total_steps, 9);
}

}  // namespace
}  // namespace vela
