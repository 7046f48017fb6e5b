// HttpServer in-process, over a tiny random model with the Qwen3 vocabulary and chat template:
// admission control (queue full -> 429 + Retry-After), a client that hangs up is cancelled in
// about one engine step, graceful shutdown ends in-flight streams with "abort", the API key gate,
// and /metrics; the event-driven HTTP layer: 2,000 slow connections leave a normal request fast,
// header / body / idle timeouts close stalled connections, 1,000 concurrent SSE streams complete
// with bounded memory. Skips without the fetched Qwen3 tokenizer.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <tuple>

#include "core/json.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "server_test_util.h"
#include "tiny_server.h"

namespace vela {
namespace {

using namespace std::chrono;

using test::tiny_engine;

// ---- raw sockets (the tests need thousands of connections and half-sent requests) ----------

// Raises this process's open-file limit (server and client share it); returns the soft limit.
int64_t raise_nofile() {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  return rl.rlim_cur == RLIM_INFINITY ? int64_t{1} << 30 : static_cast<int64_t>(rl.rlim_cur);
}

int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Seconds from `t0` until the server closes `fd` (reads and discards whatever it sends); -1 if it
// is still open `limit_s` after t0.
double seconds_until_closed(int fd, steady_clock::time_point t0, double limit_s) {
  char buf[4096];
  while (duration<double>(steady_clock::now() - t0).count() < limit_s) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return duration<double>(steady_clock::now() - t0).count();
  }
  return -1;
}

int64_t rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string key;
  int64_t v = 0;
  while (f >> key) {
    if (key == "VmRSS:") {
      f >> v;
      return v;
    }
    f.ignore(1 << 20, '\n');
  }
  return -1;
}

// Sends `req` on `n` connections at once and reads every response until the server closes
// (requests carry `Connection: close`); watches this process's RSS and thread count meanwhile.
struct Exchange {
  std::vector<std::string> responses;
  size_t n_open = 0, peak_threads = 0;
  int64_t peak_rss_kib = 0;
};
Exchange exchange_all(int port, int n, const std::string& req, double limit_s,
                      const std::function<void()>& on_tick = {}) {
  Exchange ex;
  ex.responses.resize(static_cast<size_t>(n));
  std::vector<pollfd> fds;
  auto t0 = steady_clock::now();
  for (int i = 0; i < n; ++i) {
    int fd = connect_to(port);
    if (fd < 0 || !send_all(fd, req)) {
      ADD_FAILURE() << "connection " << i << " failed";
      break;
    }
    fds.push_back({fd, POLLIN, 0});
  }
  ex.n_open = fds.size();
  char buf[16384];
  while (ex.n_open > 0 && duration<double>(steady_clock::now() - t0).count() < limit_s) {
    if (poll(fds.data(), fds.size(), 100) < 0) break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t r = recv(fds[i].fd, buf, sizeof(buf), 0);
      if (r > 0) {
        ex.responses[i].append(buf, static_cast<size_t>(r));
        continue;
      }
      close(fds[i].fd);
      fds[i].fd = -1;
      --ex.n_open;
    }
    if (on_tick) on_tick();
    ex.peak_rss_kib = std::max(ex.peak_rss_kib, rss_kib());
    ex.peak_threads = std::max<size_t>(
        ex.peak_threads, std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                       std::filesystem::directory_iterator()));
  }
  for (pollfd& p : fds)
    if (p.fd >= 0) close(p.fd);
  return ex;
}

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override { VELA_SKIP_UNLESS_ASSET(test::qwen3_dir() / "tokenizer.json"); }
  void start(EngineConfig ec, ServerConfig sc = {}) {
    engine_ = tiny_engine(ec);
    server_ = std::make_unique<test::ServerThread>(*engine_, sc);
    port_ = server_->port();
  }
  httplib::Client client(const std::string& key = "") { return server_->client(key); }
  static std::string long_request(int max_tokens, bool stream) {
    return json{
        {"prompt", "count"}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", stream}}
        .dump();
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<test::ServerThread> server_;  // stopped before engine_ is destroyed
  int port_ = 0;
};

TEST_F(ServerFixture, QueueFullAnswers429WithRetryAfter) {
  EngineConfig ec;
  ec.max_seqs = 1;
  ec.max_waiting = 1;
  start(ec);
  std::atomic<int> n_ok{0}, n_429{0}, n_other{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 6; ++i) {
    ts.emplace_back([&] {
      auto c = client();
      auto r = c.Post("/v1/completions", long_request(300, false), "application/json");
      if (!r) return ++n_other, void();
      if (r->status == 200) {
        ++n_ok;
      } else if (r->status == 429) {
        EXPECT_EQ(r->get_header_value("Retry-After"), "1");
        json j = json::parse(r->body);
        EXPECT_EQ(j["error"]["type"], "rate_limit_error");
        ++n_429;
      } else {
        ++n_other;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_GE(n_ok.load(), 1);
  EXPECT_GE(n_429.load(), 1) << "one running + one waiting: the rest must be refused";
  EXPECT_EQ(n_other.load(), 0);
}

TEST_F(ServerFixture, DisconnectCancelsTheRequest) {
  start({});
  auto c = client();
  int n_chunks = 0;
  auto t0 = steady_clock::now();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = long_request(3000, true);
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++n_chunks < 3; };
  c.send(req);  // returns once the receiver gave up and the connection closed
  int64_t steps_at_close = engine_->stats().steps;
  // The engine must drop the request promptly (it would otherwise decode 3000 tokens).
  int64_t generated = 0;
  while (steady_clock::now() - t0 < seconds(10)) {
    EngineStats s = engine_->stats();
    generated = s.generated_tokens;
    if (s.running == 0 && s.waiting == 0 && server_->server().context().n_in_flight() == 0) break;
    std::this_thread::sleep_for(milliseconds(5));
  }
  EngineStats s = engine_->stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(server_->server().context().n_in_flight(), 0);
  EXPECT_LT(generated, 1000) << "the request kept decoding after its client left";
  // The handler checks the socket at every engine event, so the cancel lands within a step or two
  // of the hang-up (the engine applies it at its next step). The bound leaves room for the handler
  // thread to lag the engine on a loaded 2-core machine (session 52's CI read 5 steps while
  // another job ran); 16 of the 3000 requested tokens is still a prompt cancel.
  std::printf("disconnect: %lld tokens generated, %lld engine steps between hang-up and idle\n",
              static_cast<long long>(generated), static_cast<long long>(s.steps - steps_at_close));
  EXPECT_LE(s.steps - steps_at_close, 16);
  EXPECT_EQ(s.kv_pages_used, s.kv_pages_cached) << "KV pages leaked";
  json st = server_->server().context().metrics.stats_json(s);
  EXPECT_EQ(st["server"]["client_disconnects"], 1);
}

TEST_F(ServerFixture, ShutdownEndsInFlightStreamsWithAbort) {
  ServerConfig sc;
  sc.shutdown_grace_s = 0.2;
  start({}, sc);
  std::string body;
  std::atomic<bool> started{false};
  std::thread t([&] {
    auto c = client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = json{
        {"messages", {{{"role", "user"}, {"content", "go"}}}},
        {"max_tokens", 3000},
        {"ignore_eos", true},
        {"stream",
         true}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
      body.append(d, n);
      started = true;
      return true;
    };
    c.send(req);
  });
  auto wait_until = steady_clock::now() + seconds(30);
  while (!started && steady_clock::now() < wait_until) std::this_thread::sleep_for(milliseconds(2));
  auto t0 = steady_clock::now();
  server_->stop();
  t.join();
  ASSERT_TRUE(started.load()) << "no stream chunk within 30 s";
  EXPECT_LT(duration<double>(steady_clock::now() - t0).count(), 5.0);
  EXPECT_NE(body.find("\"finish_reason\":\"abort\""), std::string::npos)
      << body.substr(body.size() - 300);
  EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
  EXPECT_EQ(engine_->stats().running, 0);
  auto c = client();
  EXPECT_FALSE(c.Get("/health")) << "the listener is closed";
}

TEST_F(ServerFixture, ApiKeyGatesEverythingButHealth) {
  ServerConfig sc;
  sc.api_key = "sekrit";
  start({}, sc);
  auto anon = client();
  EXPECT_EQ(anon.Get("/health")->status, 200);
  auto r = anon.Get("/v1/models");
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  EXPECT_EQ(anon.Get("/metrics")->status, 401);
  auto keyed = client("sekrit");
  EXPECT_EQ(keyed.Get("/v1/models")->status, 200);
  httplib::Headers h = {{"x-api-key", "sekrit"}};
  EXPECT_EQ(anon.Get("/stats", h)->status, 200);
  auto m = keyed.Get("/metrics");
  ASSERT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("vela_requests_total{route=\"/v1/models\",status=\"401\"} 1"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("# TYPE vela_time_to_first_token_seconds histogram"), std::string::npos);
}

// The issue-16 check: a flood of connections that send part of a request and stay open must not
// hold up anybody else (with a thread per connection, 500 of them made a request wait 17.8 s).
TEST_F(ServerFixture, TwoThousandSlowConnectionsLeaveARequestFast) {
  constexpr int kSlow = 2000;
  if (raise_nofile() < 2 * kSlow + 200) GTEST_SKIP() << "open-file limit too low for the test";
  start({});
  std::vector<int> slow;
  const std::string partial =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nCont";
  for (int i = 0; i < kSlow; ++i) {
    int fd = connect_to(port_);
    ASSERT_GE(fd, 0) << "connect " << i;
    ASSERT_TRUE(send_all(fd, partial));
    slow.push_back(fd);
  }
  auto until = steady_clock::now() + seconds(30);
  while (server_->server().n_connections() < kSlow && steady_clock::now() < until)
    std::this_thread::sleep_for(milliseconds(5));
  ASSERT_GE(server_->server().n_connections(), kSlow);
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    auto c = client();
    auto t0 = steady_clock::now();
    auto r = i % 2 ? c.Get("/health")
                   : c.Post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}.dump(),
                            "application/json");
    ms.push_back(duration<double>(steady_clock::now() - t0).count() * 1e3);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  std::sort(ms.begin(), ms.end());
  std::printf("with %d slow connections open: request latency p50 %.2f ms, max %.2f ms\n", kSlow,
              ms[ms.size() / 2], ms.back());
  EXPECT_LT(ms.back(), 100.0);
  for (int fd : slow) close(fd);
}

TEST_F(ServerFixture, TimeoutsCloseStalledConnections) {
  ServerConfig sc;
  sc.header_timeout_s = 0.3;
  sc.body_timeout_s = 0.3;
  sc.idle_timeout_s = 0.5;
  start({}, sc);
  // Nothing sent; a header that never ends; a body that never ends; idle after a response.
  int silent = connect_to(port_);
  int half_header = connect_to(port_);
  ASSERT_TRUE(send_all(half_header, "GET /health HTTP/1.1\r\nHost: x\r\n"));
  int half_body = connect_to(port_);
  ASSERT_TRUE(send_all(
      half_body, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pr"));
  int idle = connect_to(port_);
  ASSERT_TRUE(send_all(idle, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto t0 = steady_clock::now();
  for (auto [fd, name, lo, hi] : {std::tuple{silent, "no request", 0.2, 3.0},
                                  std::tuple{half_header, "partial header", 0.2, 3.0},
                                  std::tuple{half_body, "partial body", 0.2, 3.0},
                                  std::tuple{idle, "idle keep-alive", 0.3, 3.0}}) {
    double t = seconds_until_closed(fd, t0, 5.0);
    std::printf("%s: closed after %.2f s\n", name, t);
    EXPECT_GE(t, lo) << name << " closed too early";
    EXPECT_LE(t, hi) << name << " was not closed by its timeout";
    close(fd);
  }
  auto until = steady_clock::now() + seconds(2);  // the last close may still be unwinding
  while (server_->server().n_connections() > 0 && steady_clock::now() < until)
    std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(server_->server().n_connections(), 0);
  // The server still serves.
  auto c = client();
  EXPECT_EQ(c.Get("/health")->status, 200);
}

// 1,000 concurrent SSE streams (most of them queued in the engine at first) all complete, well
// formed, without a thread each; the process's memory stays bounded.
TEST_F(ServerFixture, ThousandConcurrentSseStreamsComplete) {
  constexpr int kStreams = 1000, kTokens = 8;
  if (raise_nofile() < 2 * kStreams + 200) GTEST_SKIP() << "open-file limit too low for the test";
  EngineConfig ec;
  ec.max_seqs = 128;
  ec.max_ctx = 64;
  ec.max_waiting = 2 * kStreams;
  ServerConfig sc;
  sc.http_threads = 16;  // handlers only parse and submit: a few workers serve every stream
  start(ec, sc);
  int64_t rss0 = rss_kib();
  std::string body = json{
      {"prompt", "count"},
      {"max_tokens", kTokens},
      {"ignore_eos", true},
      {"temperature", 0},
      {"stream", true}}.dump();
  std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  auto t0 = steady_clock::now();
  Exchange ex = exchange_all(port_, kStreams, req, 120);
  std::vector<std::string>& got = ex.responses;
  size_t open = ex.n_open, peak_threads = ex.peak_threads;
  int64_t peak_rss = std::max(rss0, ex.peak_rss_kib);
  double wall = duration<double>(steady_clock::now() - t0).count();
  ASSERT_EQ(open, 0u) << "streams still open after 120 s";
  int n_ok = 0;
  for (const std::string& r : got) {
    bool ok = r.rfind("HTTP/1.1 200", 0) == 0 && r.find("data: [DONE]") != std::string::npos &&
              r.size() >= 5 && r.compare(r.size() - 5, 5, "0\r\n\r\n") == 0 &&
              r.find("\"finish_reason\":\"length\"") != std::string::npos &&
              r.find("\"error\"") == std::string::npos;
    if (ok)
      ++n_ok;
    else
      ADD_FAILURE() << "a malformed stream: " << r.substr(0, 400);
    if (!ok) break;
  }
  std::printf(
      "%d SSE streams x %d tokens: %d complete in %.2f s; RSS %lld -> peak %lld MiB; "
      "peak %zu threads\n",
      kStreams, kTokens, n_ok, wall, static_cast<long long>(rss0 / 1024),
      static_cast<long long>(peak_rss / 1024), peak_threads);
  EXPECT_EQ(n_ok, kStreams);
  EXPECT_LT(peak_rss - rss0, 512 * 1024) << "memory grew by more than 512 MiB";
  EXPECT_LT(peak_threads, 64u) << "threads grew with the streams";
  EXPECT_EQ(server_->server().context().n_in_flight(), 0);
  EngineStats s = engine_->stats();
  EXPECT_EQ(s.kv_pages_used, s.kv_pages_cached) << "KV pages leaked";
}

// Non-streaming generations hold no worker either (their response is built when they end): 1,000
// at once on 4 workers run far more than 4 generations at a time, and all complete.
TEST_F(ServerFixture, ThousandConcurrentNonStreamingRequestsComplete) {
  constexpr int kRequests = 1000;
  if (raise_nofile() < 2 * kRequests + 200) GTEST_SKIP() << "open-file limit too low for the test";
  EngineConfig ec;
  ec.max_seqs = 128;
  ec.max_ctx = 64;
  ec.max_waiting = 2 * kRequests;
  ServerConfig sc;
  sc.http_threads = 4;
  sc.max_pending_requests = kRequests;  // the burst waits for a worker to parse and submit it
  start(ec, sc);
  std::string body =
      json{{"prompt", "count"}, {"max_tokens", 4}, {"ignore_eos", true}, {"temperature", 0}}.dump();
  std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  int64_t peak_in_flight = 0;
  Exchange ex = exchange_all(port_, kRequests, req, 120, [&] {
    peak_in_flight = std::max(peak_in_flight, server_->server().context().n_in_flight());
  });
  ASSERT_EQ(ex.n_open, 0u) << "requests still open after 120 s";
  int n_ok = 0, n_503 = 0;
  for (const std::string& r : ex.responses) {
    if (r.rfind("HTTP/1.1 503", 0) == 0) ++n_503;
    size_t b = r.find("\r\n\r\n");
    if (r.rfind("HTTP/1.1 200", 0) != 0 || b == std::string::npos) continue;
    json j = json::parse(r.substr(b + 4), nullptr, false);
    if (!j.is_discarded() && j["usage"]["completion_tokens"] == 4) ++n_ok;
  }
  std::printf(
      "%d concurrent non-streaming requests on 4 workers: %d complete, %d refused; peak "
      "%lld generations in flight, %zu threads\n",
      kRequests, n_ok, n_503, static_cast<long long>(peak_in_flight), ex.peak_threads);
  EXPECT_EQ(n_ok, kRequests);
  EXPECT_GT(peak_in_flight, 64) << "generations waited for workers";
  EXPECT_LT(ex.peak_threads, 32u);
  EXPECT_EQ(server_->server().context().n_in_flight(), 0);
}

}  // namespace
}  // namespace vela
