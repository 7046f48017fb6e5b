// Metrics rendering of the engine's step times: /stats carries engine.step_ms (count, mean and
// percentiles in ms per kind of step) and /metrics a Prometheus summary vela_engine_step_seconds;
// /stats also has the loop's step phases and, when forwards are timed, their GPU and launch times.
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace vela {
namespace {

TEST(Metrics, StepTimesReachStatsAndPrometheus) {
  EngineStats es;
  for (int i = 0; i < 99; ++i) es.step_times.decode.observe(3.5e-3);
  es.step_times.decode.observe(9e-3);
  es.step_times.mixed.observe(6e-3);
  Metrics m;
  json s = m.stats_json(es)["engine"]["step_ms"];
  EXPECT_EQ(s["decode"]["count"], 100);
  EXPECT_GE(s["decode"]["p50"].get<double>(), 3.5);
  EXPECT_LE(s["decode"]["p50"].get<double>(), 3.5 * 1.05);
  EXPECT_LE(s["decode"]["p99"].get<double>(), 3.5 * 1.05);  // the 100th value is past p99
  EXPECT_DOUBLE_EQ(s["decode"]["max"].get<double>(), 9.0);
  EXPECT_EQ(s["mixed"]["count"], 1);
  EXPECT_EQ(s["prefill"]["count"], 0);
  std::string p = m.prometheus(es);
  EXPECT_NE(p.find("# TYPE vela_engine_step_seconds summary"), std::string::npos);
  EXPECT_NE(p.find("vela_engine_step_seconds_count{kind=\"decode\"} 100"), std::string::npos);
  EXPECT_NE(p.find("vela_engine_step_seconds_count{kind=\"mixed\"} 1"), std::string::npos);
  EXPECT_NE(p.find("vela_engine_step_seconds{kind=\"mixed\",quantile=\"0.99\"} 0.006"),
            std::string::npos)
      << p;
}

TEST(Metrics, StepPhasesAndForwardTimesReachStats) {
  EngineStats es;
  es.decode_phases.steps = 4;
  es.decode_phases.seconds[StepPhases::kSample] = 8e-3;
  es.decode_phases.seconds[StepPhases::kProcess] = 2e-3;
  Metrics m;
  json e = m.stats_json(es)["engine"];
  EXPECT_EQ(e["step_phase_ms"]["decode"]["steps"], 4);
  EXPECT_DOUBLE_EQ(e["step_phase_ms"]["decode"]["sample"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(e["step_phase_ms"]["decode"]["process"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(e["step_phase_ms"]["decode"]["between"].get<double>(), 0.0);
  EXPECT_FALSE(e["step_phase_ms"].contains("mixed"));  // no mixed step yet
  EXPECT_TRUE(e["forward_ms"].empty());                // forwards not timed
  es.other_forwards_timed = 2;
  es.other_device_s = 10e-3;
  es.other_launch_s = 3e-3;
  e = m.stats_json(es)["engine"];
  EXPECT_DOUBLE_EQ(e["forward_ms"]["other"]["gpu_mean"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(e["forward_ms"]["other"]["launch_mean"].get<double>(), 1.5);
  EXPECT_FALSE(e["forward_ms"].contains("decode"));
}

}  // namespace
}  // namespace vela
