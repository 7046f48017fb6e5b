// Metrics rendering of the engine's step times: /stats carries engine.step_ms (count, mean and
// percentiles in ms per kind of step) and /metrics a Prometheus summary vela_engine_step_seconds.
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

}  // namespace
}  // namespace vela
