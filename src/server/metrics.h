// Metrics: the server's counters and latency histograms, rendered as Prometheus text (/metrics)
// and JSON (/stats). Engine-side numbers (queue depth, running, KV pages, prefix hits, token
// totals) come from an EngineStats snapshot at render time. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/json.h"
#include "engine/scheduler.h"

namespace vela {

// A Prometheus histogram (cumulative buckets, sum, count) plus a ring of recent samples for
// percentiles.
class LatencyHistogram {
 public:
  explicit LatencyHistogram(std::vector<double> bounds);
  void observe(double seconds);
  // Prometheus text for this histogram under `name`.
  std::string render(const std::string& name, const std::string& help) const;
  // {"count", "mean", "p50", "p90", "p99"} over the recent samples (seconds).
  json summary() const;

 private:
  static constexpr size_t kRecent = 8192;
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (non-cumulative), last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
  std::vector<double> recent_;
  size_t recent_pos_ = 0;
};

class Metrics {
 public:
  Metrics();

  void count_request(const std::string& route, int status);
  void add_tokens(int64_t prompt, int64_t generated);
  void observe_ttft(double s) { ttft_.observe(s); }
  void observe_itl(double s) { itl_.observe(s); }
  void observe_e2e(double s) { e2e_.observe(s); }
  void client_disconnected() { ++disconnects_; }
  void rejected_overload() { ++rejected_; }
  void set_in_flight(int64_t n) { in_flight_ = n; }

  std::string prometheus(const EngineStats& es) const;
  json stats_json(const EngineStats& es) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::atomic<int64_t> prompt_tokens_{0}, generated_tokens_{0};
  std::atomic<int64_t> disconnects_{0}, rejected_{0}, in_flight_{0};
  LatencyHistogram ttft_, itl_, e2e_;
};

}  // namespace vela
