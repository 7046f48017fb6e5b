// Metrics rendering. Names follow Prometheus conventions (vela_ prefix, _total counters, _seconds
// histograms) and mirror vLLM's (time_to_first_token, inter_token_latency, num_requests_running).
#include "server/metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

namespace vela {

namespace {
std::string fmt(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}
std::array<std::pair<const char*, const StepTimeHistogram*>, 3> step_kinds(const StepTimes& t) {
  return {{{"decode", &t.decode}, {"mixed", &t.mixed}, {"prefill", &t.prefill}}};
}
}  // namespace

LatencyHistogram::LatencyHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  recent_.reserve(kRecent);
}

void LatencyHistogram::observe(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t b = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
  ++counts_[b];
  sum_ += seconds;
  ++count_;
  if (recent_.size() < kRecent) {
    recent_.push_back(seconds);
  } else {
    recent_[recent_pos_] = seconds;
    recent_pos_ = (recent_pos_ + 1) % kRecent;
  }
}

std::string LatencyHistogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  os << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    os << name << "_bucket{le=\"" << fmt(bounds_[i]) << "\"} " << cum << "\n";
  }
  cum += counts_.back();
  os << name << "_bucket{le=\"+Inf\"} " << cum << "\n";
  os << name << "_sum " << fmt(sum_) << "\n" << name << "_count " << count_ << "\n";
  return os.str();
}

json LatencyHistogram::summary() const {
  std::vector<double> v;
  uint64_t count;
  double sum;
  {
    std::lock_guard<std::mutex> lock(mu_);
    v = recent_;
    count = count_;
    sum = sum_;
  }
  json j = {{"count", count}, {"mean", count ? sum / static_cast<double>(count) : 0.0}};
  std::sort(v.begin(), v.end());
  auto pct = [&](double q) {
    if (v.empty()) return 0.0;
    size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
    return v[std::min(i, v.size() - 1)];
  };
  j["p50"] = pct(0.50);
  j["p90"] = pct(0.90);
  j["p99"] = pct(0.99);
  return j;
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
            0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.5}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
            50.0, 60.0, 120.0}) {}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
}

void Metrics::add_tokens(int64_t prompt, int64_t generated) {
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}

std::string Metrics::prometheus(const EngineStats& es) const {
  std::ostringstream os;
  os << "# HELP vela_requests_total HTTP requests by route and status code.\n"
        "# TYPE vela_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_)
      os << "vela_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} "
         << n << "\n";
  }
  auto counter = [&](const char* name, const char* help, int64_t v) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n"
       << name << " " << v << "\n";
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n"
       << name << " " << fmt(v) << "\n";
  };
  counter("vela_prompt_tokens_total", "Prompt tokens of answered API requests.",
          prompt_tokens_.load());
  counter("vela_generation_tokens_total", "Generated tokens of answered API requests.",
          generated_tokens_.load());
  counter("vela_engine_prompt_tokens_total", "Prompt tokens the engine prefilled.",
          es.prompt_tokens);
  counter("vela_engine_generation_tokens_total", "Tokens the engine sampled.", es.generated_tokens);
  counter("vela_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.",
          es.prefix_hit_tokens);
  counter("vela_preemptions_total", "Requests preempted (recomputed) for lack of KV pages.",
          es.preemptions);
  counter("vela_overlapped_steps_total",
          "Decode steps launched before their predecessor's samples were read.",
          es.overlapped_steps);
  counter("vela_spec_verify_rows_total",
          "Speculative decoding: sample rows that verified drafts in one target step.",
          es.speculative.rows);
  counter("vela_spec_draft_tokens_total", "Speculative decoding: draft tokens verified.",
          es.speculative.drafted);
  counter("vela_spec_accepted_tokens_total", "Speculative decoding: draft tokens accepted.",
          es.speculative.accepted);
  counter("vela_spec_emitted_tokens_total",
          "Speculative decoding: tokens emitted by verification rows (accepted + 1 each).",
          es.speculative.emitted);
  gauge("vela_spec_acceptance_rate", "Speculative decoding: accepted / drafted tokens.",
        es.speculative.acceptance_rate());
  gauge("vela_spec_tokens_per_step",
        "Speculative decoding: tokens a verifying sample emits per target step.",
        es.speculative.tokens_per_step());
  counter("vela_spec_draft_forwards_total",
          "Speculative decoding: draft-model forwards (catch-up and one-token steps).",
          es.speculative.draft_forwards);
  gauge("vela_spec_draft_seconds",
        "Speculative decoding: wall seconds spent drafting with the "
        "draft model so far.",
        es.speculative.draft_seconds);
  counter("vela_client_disconnects_total", "Requests cancelled because the client went away.",
          disconnects_.load());
  counter("vela_rejected_requests_total", "Requests refused by admission control (429/503).",
          rejected_.load());
  gauge("vela_num_requests_running", "Samples being decoded.", static_cast<double>(es.running));
  gauge("vela_num_requests_waiting", "Samples in the engine's waiting queue (queue depth).",
        static_cast<double>(es.waiting));
  gauge("vela_http_requests_in_flight", "API requests being served.",
        static_cast<double>(in_flight_.load()));
  gauge("vela_kv_pages_total", "KV cache pages.", static_cast<double>(es.kv_pages_total));
  gauge("vela_kv_pages_used", "KV cache pages in use (tasks or prefix cache).",
        static_cast<double>(es.kv_pages_used));
  gauge("vela_kv_pages_cached", "KV cache pages held by the prefix cache.",
        static_cast<double>(es.kv_pages_cached));
  gauge("vela_kv_cache_usage_ratio", "Fraction of KV pages in use.",
        es.kv_pages_total
            ? static_cast<double>(es.kv_pages_used) / static_cast<double>(es.kv_pages_total)
            : 0.0);
  gauge("vela_generation_tokens_per_second", "Recent generation throughput.", es.tokens_per_s);
  os << "# HELP vela_engine_step_seconds Engine step wall time by what the step carried "
        "(decode rows only, decode + prompt chunks, prompt chunks only).\n"
        "# TYPE vela_engine_step_seconds summary\n";
  for (const auto& [kind, h] : step_kinds(es.step_times)) {
    for (double q : {0.5, 0.9, 0.99})
      os << "vela_engine_step_seconds{kind=\"" << kind << "\",quantile=\"" << fmt(q) << "\"} "
         << fmt(h->quantile(q)) << "\n";
    os << "vela_engine_step_seconds_sum{kind=\"" << kind << "\"} " << fmt(h->sum()) << "\n"
       << "vela_engine_step_seconds_count{kind=\"" << kind << "\"} " << h->count() << "\n";
  }
  os << ttft_.render("vela_time_to_first_token_seconds",
                     "Time from request arrival to first token.");
  os << itl_.render("vela_inter_token_latency_seconds", "Time between consecutive output tokens.");
  os << e2e_.render("vela_e2e_request_latency_seconds", "Time from request arrival to its end.");
  return os.str();
}

json Metrics::stats_json(const EngineStats& es) const {
  json steps = json::object();
  for (const auto& [kind, h] : step_kinds(es.step_times))
    steps[kind] = {{"count", h->count()},     {"mean", 1e3 * h->mean()},
                   {"p50", 1e3 * h->quantile(0.5)}, {"p90", 1e3 * h->quantile(0.9)},
                   {"p99", 1e3 * h->quantile(0.99)}, {"max", 1e3 * h->max()}};
  // With VELA_TIME_DEVICE=1 (or EngineConfig::time_device): each forward's stream time and the
  // host time spent enqueuing it, decode steps and the others apart.
  json forwards = json::object();
  auto forward_ms = [&](const char* kind, int64_t n, double device_s, double launch_s) {
    if (n > 0)
      forwards[kind] = {{"count", n},
                        {"gpu_mean", 1e3 * device_s / static_cast<double>(n)},
                        {"launch_mean", 1e3 * launch_s / static_cast<double>(n)}};
  };
  forward_ms("decode", es.decode_forwards_timed, es.decode_device_s, es.decode_launch_s);
  forward_ms("other", es.other_forwards_timed, es.other_device_s, es.other_launch_s);
  // Where the loop thread's time goes per step (StepPhases), decode-only and mixed steps apart.
  json phases = json::object();
  for (const auto& [kind, ph] : {std::pair<const char*, const StepPhases*>{"decode", &es.decode_phases},
                                 {"mixed", &es.mixed_phases}}) {
    if (ph->steps == 0) continue;
    json p = {{"steps", ph->steps}};
    for (int k = 0; k < StepPhases::kCount; ++k)
      p[StepPhases::kNames[k]] = 1e3 * ph->seconds[static_cast<size_t>(k)] / static_cast<double>(ph->steps);
    phases[kind] = p;
  }
  json req = json::object();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_) req[key.first][std::to_string(key.second)] = n;
  }
  return json{
      {"engine",
       {{"running", es.running},
        {"waiting", es.waiting},
        {"kv_pages_total", es.kv_pages_total},
        {"kv_pages_used", es.kv_pages_used},
        {"kv_pages_free", es.kv_pages_free},
        {"kv_pages_cached", es.kv_pages_cached},
        {"prefix_hit_tokens", es.prefix_hit_tokens},
        {"prompt_tokens", es.prompt_tokens},
        {"generated_tokens", es.generated_tokens},
        {"preemptions", es.preemptions},
        {"steps", es.steps},
        {"overlapped_steps", es.overlapped_steps},
        {"prefill_chunks", es.prefill_chunks},
        {"mixed_steps", es.mixed_steps},
        {"max_step_tokens", es.max_step_tokens},
        {"decode_rows_deferred", es.decode_rows_deferred},
        {"step_ms", steps},
        {"forward_ms", forwards},
        {"step_phase_ms", phases},
        {"tokens_per_s", es.tokens_per_s},
        {"policy_version", es.policy_version},
        {"speculative",
         {{"verify_rows", es.speculative.rows},
          {"draft_tokens", es.speculative.drafted},
          {"accepted_tokens", es.speculative.accepted},
          {"emitted_tokens", es.speculative.emitted},
          {"acceptance_rate", es.speculative.acceptance_rate()},
          {"tokens_per_step", es.speculative.tokens_per_step()},
          {"draft_forwards", es.speculative.draft_forwards},
          {"draft_seconds", es.speculative.draft_seconds}}}}},
      {"server",
       {{"requests", req},
        {"in_flight", in_flight_.load()},
        {"prompt_tokens", prompt_tokens_.load()},
        {"generated_tokens", generated_tokens_.load()},
        {"client_disconnects", disconnects_.load()},
        {"rejected", rejected_.load()}}},
      {"latency",
       {{"ttft_s", ttft_.summary()}, {"itl_s", itl_.summary()}, {"e2e_s", e2e_.summary()}}}};
}

}  // namespace vela
