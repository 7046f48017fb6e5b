// `vela bench serve`: a load generator for an OpenAI-compatible server (`vela serve` or another,
// e.g. vLLM), in the spirit of `vllm bench serve`. Streams requests to /v1/completions or
// /v1/chat/completions, either closed loop (N concurrent streams, each starting the next request
// when it finishes) or open loop (Poisson arrivals at a request rate, optionally capped in
// concurrency), with prompt and output lengths drawn from uniform ranges (random words) or prompts
// from a JSONL file. Reports request throughput, output tok/s, TTFT, inter-token latency (ITL:
// gaps between streamed chunks), time per output token (TPOT) and end-to-end latency percentiles,
// and errors; --out writes the same as JSON.
//
// The client (serve_client.h) is event-driven (Boost.Asio, one thread): thousands of concurrent
// streams cost no thread each. Optionally it also holds --slow-connections open, each with half a
// request sent, to measure what slow clients do to everyone else (the run starts a second after
// they are open). Output tokens come from the stream's usage (stream_options.include_usage); a
// server that sends none gets one token counted per chunk.
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/serve_client.h"
#include "cli/args.h"
#include "core/error.h"
#include "core/json.h"
#include "core/rng.h"
#include "engine/step_times.h"

namespace vela::cli {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

// ---- workload -------------------------------------------------------------------------------

struct Range {
  int64_t lo = 0, hi = 0;
};

// "N" or "LO:HI" (inclusive), both >= min.
Range parse_range(const std::string& flag, const std::string& s, int64_t min) {
  Range r;
  size_t colon = s.find(':');
  try {
    r.lo = std::stoll(s.substr(0, colon));
    r.hi = colon == std::string::npos ? r.lo : std::stoll(s.substr(colon + 1));
  } catch (const std::exception&) {
    VELA_THROW(InvalidArgument, "--", flag, " must be N or LO:HI, got '", s, "'");
  }
  VELA_CHECK(r.lo >= min && r.hi >= r.lo, "--", flag, " must be N or LO:HI with ", min,
             " <= LO <= HI, got '", s, "'");
  return r;
}

int64_t draw(const Range& r, Rng& rng) {
  if (r.lo == r.hi) return r.lo;
  int64_t span = r.hi - r.lo + 1;
  return r.lo + static_cast<int64_t>(rng.next_u32() % static_cast<uint32_t>(span));
}

// Plain English words for random prompts (a real tokenizer turns each into one or two tokens).
const char* const kWords[] = {
    "the",      "of",       "and",     "to",      "in",       "is",       "that",   "for",
    "it",       "as",       "was",     "with",    "be",       "by",       "on",     "not",
    "he",       "this",     "are",     "or",      "his",      "from",     "at",     "which",
    "but",      "have",     "an",      "had",     "they",     "you",      "were",   "their",
    "one",      "all",      "we",      "can",     "her",      "has",      "there",  "been",
    "if",       "more",     "when",    "will",    "would",    "who",      "so",     "no",
    "river",    "mountain", "light",   "house",   "window",   "garden",   "winter", "summer",
    "city",     "road",     "market",  "music",   "paper",    "stone",    "cloud",  "engine",
    "signal",   "answer",   "number",  "letter",  "history",  "science",  "system", "machine",
    "language", "question", "story",   "problem", "morning",  "evening",  "ocean",  "forest",
    "quickly",  "slowly",   "bright",  "quiet",   "ancient",  "modern",   "simple", "careful",
    "explain",  "describe", "compare", "imagine", "remember", "consider", "follow", "build",
    "measure",  "travel",   "write",   "read",    "listen",   "carry",    "open",   "close"};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

struct Workload {
  json body;           // the request body (stream fields added when sent)
  int64_t max_tokens;  // requested output tokens
};

std::string random_prompt(int64_t n_words, Rng& rng) {
  std::string p;
  for (int64_t i = 0; i < n_words; ++i) {
    if (i) p += ' ';
    p += kWords[rng.next_u32() % kNumWords];
  }
  return p;
}

// One line of a prompt file: {"prompt": "..."} or {"messages": [...]}, optional "max_tokens".
Workload file_workload(const json& line, bool chat, int64_t out_tokens, const std::string& where) {
  VELA_CHECK(line.is_object(), where, ": each line must be a JSON object");
  Workload w;
  w.max_tokens = out_tokens;
  if (auto it = line.find("max_tokens"); it != line.end()) {
    VELA_CHECK(it->is_number_integer() && it->get<int64_t>() >= 1, where,
               ": max_tokens must be a positive integer");
    w.max_tokens = it->get<int64_t>();
  }
  auto p = line.find("prompt");
  auto m = line.find("messages");
  VELA_CHECK(p != line.end() || m != line.end(), where, ": needs \"prompt\" or \"messages\"");
  if (chat) {
    if (m != line.end()) {
      VELA_CHECK(m->is_array() && !m->empty(), where, ": messages must be a non-empty array");
      w.body["messages"] = *m;
    } else {
      VELA_CHECK(p->is_string(), where, ": prompt must be a string");
      w.body["messages"] = json::array({{{"role", "user"}, {"content", *p}}});
    }
  } else {
    VELA_CHECK(p != line.end() && p->is_string(), where,
               ": --api completions needs a string \"prompt\" on every line");
    w.body["prompt"] = *p;
  }
  return w;
}

// ---- results --------------------------------------------------------------------------------

// The engine's step figures from a vela server's GET /stats: step_ms, step_phase_ms and, when it
// times its forwards (VELA_TIME_DEVICE=1), forward_ms; null from any other server or on any error.
json server_engine_stats(asio::io_context& io, const tcp::resolver::results_type& eps,
                         const Target& target, const std::string& key) {
  try {
    std::string resp = http_get(io, eps, target.host, target.base_path + "/stats", key);
    size_t body = resp.find("\r\n\r\n");
    json j = json::parse(body == std::string::npos ? "" : resp.substr(body + 4), nullptr, false);
    if (!j.is_object() || !j.contains("engine") || !j["engine"].is_object()) return nullptr;
    const json& engine = j["engine"];
    auto object_at = [&](const char* key) {
      return engine.contains(key) && engine[key].is_object();
    };
    if (!object_at("step_ms")) return nullptr;
    json out = {{"step_ms", engine["step_ms"]}};
    if (object_at("step_phase_ms")) out["step_phase_ms"] = engine["step_phase_ms"];
    if (object_at("forward_ms") && !engine["forward_ms"].empty())  // {} unless timed
      out["forward_ms"] = engine["forward_ms"];
    return out;
  } catch (const std::exception&) {
  }
  return nullptr;
}

json percentiles_ms(std::vector<double> v) {
  if (v.empty()) return json{{"count", 0}};
  std::sort(v.begin(), v.end());
  auto pct = [&](double q) {
    double pos = q * static_cast<double>(v.size() - 1);
    size_t i = static_cast<size_t>(pos);
    double f = pos - static_cast<double>(i);
    double a = v[i], b = v[std::min(i + 1, v.size() - 1)];
    return 1e3 * (a + (b - a) * f);
  };
  double sum = 0;
  for (double x : v) sum += x;
  return json{{"count", v.size()}, {"mean", 1e3 * sum / static_cast<double>(v.size())},
              {"p50", pct(0.5)},   {"p90", pct(0.9)},
              {"p99", pct(0.99)},  {"max", 1e3 * v.back()}};
}

}  // namespace

int bench_serve_main(int argc, char** argv) {
  Args args(argc, argv, {"help", "no-ignore-eos"});
  if (args.has("help")) {
    std::printf(
        "usage: vela bench serve [--url http://127.0.0.1:8000] [--api completions|chat]\n"
        "         [--model NAME] [--api-key K] [--num-requests 200]\n"
        "         [--concurrency N | --request-rate R [--max-concurrency N]]\n"
        "         [--prompt-words 100:300 | --prompt-file FILE.jsonl] [--output-tokens 256]\n"
        "         [--temperature 0] [--no-ignore-eos] [--seed 0] [--timeout 600]\n"
        "         [--slow-connections N] [--out FILE.json]\n"
        "Load generator for an OpenAI-compatible server (vela serve, vLLM, ...). Closed loop:\n"
        "--concurrency N streams, each starting the next request when one ends (default 16).\n"
        "Open loop: --request-rate R requests/s with Poisson arrivals. Ranges are N or LO:HI\n"
        "(uniform). Prompt files: one JSON object per line, {\"prompt\": ...} or\n"
        "{\"messages\": [...]}, optional \"max_tokens\". Reports request throughput, output\n"
        "tok/s, TTFT / ITL / TPOT / latency percentiles (ms) and errors. See docs/serving.md.\n");
    return 0;
  }
  std::string url = args.get("url", "http://127.0.0.1:8000");
  std::string api = args.get("api", "completions");
  std::string model = args.get("model", "");
  std::string key = args.get("api-key", "");
  if (key.empty())
    for (const char* env : {"VELA_API_KEY", "OPENAI_API_KEY"})
      if (const char* v = std::getenv(env); v && *v) {
        key = v;
        break;
      }
  int64_t n_requests = args.get_int("num-requests", 200);
  bool open_loop = args.has("request-rate");
  double rate = args.get_double("request-rate", 0);
  int64_t concurrency = args.get_int("concurrency", open_loop ? 0 : 16);
  int64_t max_conc = args.get_int("max-concurrency", 0);
  std::string prompt_file = args.get("prompt-file", "");
  Range words = parse_range("prompt-words", args.get("prompt-words", "100:300"), 1);
  Range out_tokens = parse_range("output-tokens", args.get("output-tokens", "256"), 1);
  double temperature = args.get_double("temperature", 0.0);
  bool ignore_eos = !args.has("no-ignore-eos");
  uint64_t seed = static_cast<uint64_t>(args.get_int("seed", 0));
  double timeout_s = args.get_double("timeout", 600);
  int64_t n_slow = args.get_int("slow-connections", 0);
  std::string out_path = args.get("out", "");
  args.check_all_used();
  VELA_CHECK(api == "completions" || api == "chat", "--api must be completions or chat, got '", api,
             "'");
  VELA_CHECK(n_requests >= 1, "--num-requests must be >= 1, got ", n_requests);
  VELA_CHECK(!open_loop || rate > 0, "--request-rate must be > 0, got ", rate);
  VELA_CHECK(!(open_loop && concurrency > 0),
             "give --concurrency (closed loop) or --request-rate (open loop), not both; cap an "
             "open loop with --max-concurrency");
  VELA_CHECK(open_loop || concurrency >= 1, "--concurrency must be >= 1, got ", concurrency);
  VELA_CHECK(max_conc >= 0 && (open_loop || max_conc == 0),
             "--max-concurrency applies to --request-rate only (and must be >= 0)");
  VELA_CHECK(timeout_s > 0, "--timeout must be > 0, got ", timeout_s);
  VELA_CHECK(n_slow >= 0, "--slow-connections must be >= 0, got ", n_slow);
  bool chat = api == "chat";
  raise_nofile();

  Target target = parse_url(url);
  asio::io_context io;
  tcp::resolver resolver(io);
  boost::system::error_code ec;
  tcp::resolver::results_type eps = resolver.resolve(target.host, target.port, ec);
  VELA_CHECK_T(IoError, !ec, "cannot resolve ", target.host, ": ", ec.message());
  if (model.empty()) {  // the first model the server lists
    std::string resp;
    try {
      resp = http_get(io, eps, target.host, target.base_path + "/v1/models", key);
    } catch (const std::exception& e) {
      VELA_THROW(IoError, "cannot reach ", url, " (", e.what(), ")");
    }
    size_t body = resp.find("\r\n\r\n");
    json j = json::parse(body == std::string::npos ? "" : resp.substr(body + 4), nullptr, false);
    VELA_CHECK_T(
        IoError,
        !j.is_discarded() && j.contains("data") && j["data"].is_array() && !j["data"].empty(),
        "GET /v1/models on ", url, " did not list a model; pass --model (", resp.substr(0, 200),
        ")");
    model = j["data"][0].value("id", "");
  }

  // The workload, fixed before the run (same seed, same requests).
  Rng rng(seed, 11);
  std::vector<Workload> work;
  if (!prompt_file.empty()) {
    std::ifstream f(prompt_file);
    VELA_CHECK_T(IoError, f.good(), "cannot open --prompt-file ", prompt_file);
    std::vector<json> lines;
    std::string line;
    int64_t n = 0;
    while (std::getline(f, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json j = json::parse(line, nullptr, false);
      VELA_CHECK(!j.is_discarded(), prompt_file, ":", n, ": not valid JSON");
      lines.push_back(j);
      work.push_back(file_workload(j, chat, 0, prompt_file + ":" + std::to_string(n)));
    }
    VELA_CHECK(!work.empty(), "--prompt-file ", prompt_file, " has no prompts");
    std::vector<Workload> cycled;  // cycle through the file for --num-requests
    for (int64_t i = 0; i < n_requests; ++i) {
      Workload w = work[static_cast<size_t>(i) % work.size()];
      if (w.max_tokens == 0) w.max_tokens = draw(out_tokens, rng);
      cycled.push_back(std::move(w));
    }
    work = std::move(cycled);
  } else {
    for (int64_t i = 0; i < n_requests; ++i) {
      Workload w;
      std::string p = random_prompt(draw(words, rng), rng);
      if (chat)
        w.body["messages"] = json::array({{{"role", "user"}, {"content", p}}});
      else
        w.body["prompt"] = p;
      w.max_tokens = draw(out_tokens, rng);
      work.push_back(std::move(w));
    }
  }
  std::vector<std::string> requests;
  std::string path = target.base_path + (chat ? "/v1/chat/completions" : "/v1/completions");
  for (Workload& w : work) {
    json b = w.body;
    b["model"] = model;
    b["max_tokens"] = w.max_tokens;
    b["temperature"] = temperature;
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
    if (ignore_eos) b["ignore_eos"] = true;
    std::string body = b.dump();
    std::string r = "POST " + path + " HTTP/1.1\r\nHost: " + target.host + ":" + target.port +
                    "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
                    "Connection: close\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n";
    if (!key.empty()) r += "Authorization: Bearer " + key + "\r\n";
    requests.push_back(r + "\r\n" + body);
  }

  // Slow connections: half a request each, held open for the whole run.
  std::vector<std::unique_ptr<tcp::socket>> slow;
  for (int64_t i = 0; i < n_slow; ++i) {
    auto s = std::make_unique<tcp::socket>(io);
    asio::connect(*s, eps, ec);
    VELA_CHECK_T(IoError, !ec, "slow connection ", i, ": ", ec.message());
    std::string partial = "POST " + path + " HTTP/1.1\r\nHost: " + target.host +
                          "\r\nContent-Type: application/json\r\nContent-Len";
    asio::write(*s, asio::buffer(partial), ec);
    slow.push_back(std::move(s));
  }
  // Let the server take them in (accept, read the partial headers) before measuring.
  if (n_slow > 0) std::this_thread::sleep_for(std::chrono::seconds(1));

  std::printf("bench serve: %s %s, model %s, %lld requests, %s\n", url.c_str(), path.c_str(),
              model.c_str(), static_cast<long long>(n_requests),
              open_loop ? ("open loop " + std::to_string(rate) + " req/s" +
                           (max_conc ? ", max concurrency " + std::to_string(max_conc) : ""))
                              .c_str()
                        : ("closed loop, concurrency " + std::to_string(concurrency)).c_str());
  std::fflush(stdout);

  // Scheduling: closed loop starts the next request when one ends; open loop releases requests
  // at Poisson arrival times into a queue that at most max_conc (0 = unbounded) drain.
  std::vector<Outcome> outcomes(requests.size());
  size_t next = 0, n_done = 0;
  int64_t in_flight = 0, peak_in_flight = 0;
  std::deque<size_t> released;
  Clock::time_point t0 = Clock::now();
  int64_t cap = open_loop ? (max_conc > 0 ? max_conc : INT64_MAX) : concurrency;
  std::function<void()> pump;
  auto launch = [&](size_t i) {
    ++in_flight;
    peak_in_flight = std::max(peak_in_flight, in_flight);
    start_stream(io, eps, requests[i], chat, t0, timeout_s, [&, i](Outcome o) {
      outcomes[i] = std::move(o);
      --in_flight;
      ++n_done;
      asio::post(io, [&] { pump(); });
    });
  };
  pump = [&] {
    if (!open_loop) {
      while (in_flight < cap && next < requests.size()) launch(next++);
      return;
    }
    while (in_flight < cap && !released.empty()) {
      size_t i = released.front();
      released.pop_front();
      launch(i);
    }
  };
  asio::steady_timer arrivals(io);
  std::function<void()> schedule_arrival;
  double t_arrival = 0;
  Rng arrival_rng(seed, 12);
  schedule_arrival = [&] {
    if (next >= requests.size()) return;
    double u = std::max(1e-12, static_cast<double>(arrival_rng.uniform()));
    t_arrival += -std::log(u) / rate;
    arrivals.expires_at(
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t_arrival)));
    arrivals.async_wait([&](boost::system::error_code e) {
      if (e) return;
      released.push_back(next++);
      pump();
      schedule_arrival();
    });
  };
  if (open_loop) {
    released.push_back(next++);  // the first request at t = 0
    pump();
    schedule_arrival();
  } else {
    pump();
  }
  io.run();
  double wall = since(t0, Clock::now());
  slow.clear();

  // Aggregate.
  std::vector<double> ttft, itl, tpot, e2e;
  int64_t n_ok = 0, out_total = 0, in_total = 0;
  double first = 1e300, last = 0;
  std::map<std::string, int64_t> errors;
  for (const Outcome& o : outcomes) {
    first = std::min(first, o.start);
    last = std::max(last, o.end);
    if (!o.ok) {
      ++errors[o.error.substr(0, 160)];
      continue;
    }
    ++n_ok;
    out_total += o.output_tokens;
    if (o.prompt_tokens > 0) in_total += o.prompt_tokens;
    if (o.ttft >= 0) ttft.push_back(o.ttft);
    e2e.push_back(o.end - o.start);
    for (size_t k = 1; k < o.chunk_times.size(); ++k)
      itl.push_back(o.chunk_times[k] - o.chunk_times[k - 1]);
    if (o.output_tokens > 1 && o.ttft >= 0)
      tpot.push_back((o.end - o.start - o.ttft) / static_cast<double>(o.output_tokens - 1));
  }
  double dur = std::max(1e-9, last - first);
  int64_t n_failed = static_cast<int64_t>(outcomes.size()) - n_ok;
  json res = {
      {"benchmark", "serve"},
      {"url", url},
      {"api", api},
      {"model", model},
      {"mode", open_loop ? "open_loop" : "closed_loop"},
      {"request_rate", open_loop ? json(rate) : json(nullptr)},
      {"concurrency",
       open_loop ? json(max_conc > 0 ? json(max_conc) : json(nullptr)) : json(concurrency)},
      {"num_requests", n_requests},
      {"prompts", prompt_file.empty() ? json{{"random_words", {words.lo, words.hi}}}
                                      : json{{"file", prompt_file}}},
      {"output_tokens", {out_tokens.lo, out_tokens.hi}},
      {"temperature", temperature},
      {"ignore_eos", ignore_eos},
      {"slow_connections", n_slow},
      {"completed", n_ok},
      {"failed", n_failed},
      {"duration_s", dur},
      {"wall_s", wall},
      {"peak_concurrency", peak_in_flight},
      {"request_throughput", static_cast<double>(n_ok) / dur},
      {"input_tokens", in_total},
      {"output_tokens_total", out_total},
      {"output_throughput", static_cast<double>(out_total) / dur},
      {"ttft_ms", percentiles_ms(ttft)},
      {"itl_ms", percentiles_ms(itl)},
      {"tpot_ms", percentiles_ms(tpot)},
      {"e2e_latency_ms", percentiles_ms(e2e)},
  };
  json errs = json::object();
  for (const auto& [what, n] : errors) errs[what] = n;
  res["errors"] = errs;

  std::printf("  completed %lld, failed %lld in %.2f s (peak %lld concurrent)\n",
              static_cast<long long>(n_ok), static_cast<long long>(n_failed), dur,
              static_cast<long long>(peak_in_flight));
  std::printf(
      "  request throughput %.2f req/s, output %.1f tok/s (%lld output, %lld input tokens)\n",
      static_cast<double>(n_ok) / dur, static_cast<double>(out_total) / dur,
      static_cast<long long>(out_total), static_cast<long long>(in_total));
  for (const char* k : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_latency_ms"}) {
    const json& p = res[k];
    if (p["count"] == 0) continue;
    std::printf("  %-15s mean %9.2f  p50 %9.2f  p90 %9.2f  p99 %9.2f  max %9.2f\n", k,
                p["mean"].get<double>(), p["p50"].get<double>(), p["p90"].get<double>(),
                p["p99"].get<double>(), p["max"].get<double>());
  }
  for (const auto& [what, n] : errors)
    std::printf("  error x%lld: %s\n", static_cast<long long>(n), what.c_str());
  // A vela server also says how long its engine steps took (since it started; the mixed steps'
  // tail is where a decode stream's inter-token tail comes from) and where their time went.
  json server = server_engine_stats(io, eps, target, key);
  if (!server.is_null()) {
    const json& steps = server["step_ms"];
    res["server_step_ms"] = steps;
    for (const auto& [kind, p] : steps.items()) {
      if (p.value("count", 0) == 0) continue;
      std::printf(
          "  server %-8s steps %7lld  mean %6.2f  p50 %6.2f  p90 %6.2f  p99 %6.2f  max %6.2f ms\n",
          kind.c_str(), static_cast<long long>(p["count"].get<int64_t>()), p["mean"].get<double>(),
          p["p50"].get<double>(), p["p90"].get<double>(), p["p99"].get<double>(),
          p["max"].get<double>());
    }
    if (server.contains("step_phase_ms")) {
      res["server_step_phase_ms"] = server["step_phase_ms"];
      for (const auto& [kind, p] : server["step_phase_ms"].items()) {
        std::printf("  server %-8s step phases (mean ms):", kind.c_str());
        for (const char* name : StepPhases::kNames)
          if (p.contains(name) && p[name].is_number())
            std::printf(" %s %.3f", name, p[name].get<double>());
        std::printf("\n");
      }
    }
    if (server.contains("forward_ms")) {
      res["server_forward_ms"] = server["forward_ms"];
      for (const auto& [kind, p] : server["forward_ms"].items())
        std::printf("  server %-8s forwards %7lld  on the GPU %6.2f ms, enqueued in %6.2f ms\n",
                    kind.c_str(), static_cast<long long>(p.value("count", int64_t{0})),
                    p.value("gpu_mean", 0.0), p.value("launch_mean", 0.0));
    }
  }
  if (!out_path.empty()) {
    std::ofstream f(out_path);
    VELA_CHECK_T(IoError, f.good(), "cannot write --out ", out_path);
    f << res.dump(1) << "\n";
  }
  return n_failed == 0 ? 0 : 1;
}

}  // namespace vela::cli
