// HttpServer in-process, over a tiny random model with the Qwen3 vocabulary and chat template:
// admission control (queue full -> 429 + Retry-After), a client that hangs up is cancelled in
// about one engine step, graceful shutdown ends in-flight streams with "abort", the API key gate,
// and /metrics. Skips without the fetched Qwen3 tokenizer.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/json.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "server_test_util.h"

namespace vela {
namespace {

using namespace std::chrono;

std::unique_ptr<Engine> tiny_engine(EngineConfig cfg) {
  const Tokenizer* tok = test::qwen3_tokenizer();
  json c = {{"model_type", "qwen3"},
            {"vocab_size", tok->vocab_size()},
            {"hidden_size", 32},
            {"intermediate_size", 64},
            {"num_hidden_layers", 1},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"head_dim", 8},
            {"max_position_embeddings", 4096},
            {"tie_word_embeddings", true},
            {"eos_token_id", json::array({151645})}};
  ModelConfig mc = ModelConfig::from_json(c, "test");
  Transformer model = Transformer::random(mc, DType::kF32, Device::cpu(), 3);
  return std::make_unique<Engine>(
      std::move(model),
      std::make_unique<Tokenizer>(Tokenizer::from_file(test::qwen3_dir().string())), cfg);
}

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override { VELA_SKIP_UNLESS_ASSET(test::qwen3_dir() / "tokenizer.json"); }
  void start(EngineConfig ec, ServerConfig sc = {}) {
    engine_ = tiny_engine(ec);
    sc.port = 0;
    sc.model_name = "tiny";
    server_ = std::make_unique<HttpServer>(
        *engine_, sc, ChatTemplate::from_tokenizer_config(test::qwen3_dir().string()));
    port_ = server_->bind();
    runner_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    if (server_) server_->shutdown();
    if (runner_.joinable()) runner_.join();
  }
  httplib::Client client(const std::string& key = "") {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    if (!key.empty()) c.set_bearer_token_auth(key.c_str());
    return c;
  }
  static std::string long_request(int max_tokens, bool stream) {
    return json{
        {"prompt", "count"}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", stream}}
        .dump();
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread runner_;
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
    if (s.running == 0 && s.waiting == 0 && server_->context().n_in_flight() == 0) break;
    std::this_thread::sleep_for(milliseconds(5));
  }
  EngineStats s = engine_->stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(server_->context().n_in_flight(), 0);
  EXPECT_LT(generated, 1000) << "the request kept decoding after its client left";
  // The handler checks the socket at every engine event, so the cancel lands within a step or two
  // of the hang-up (the engine applies it at its next step).
  std::printf("disconnect: %lld tokens generated, %lld engine steps between hang-up and idle\n",
              static_cast<long long>(generated), static_cast<long long>(s.steps - steps_at_close));
  EXPECT_LE(s.steps - steps_at_close, 4);
  EXPECT_EQ(s.kv_pages_used, s.kv_pages_cached) << "KV pages leaked";
  json st = server_->context().metrics.stats_json(s);
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
  server_->shutdown();
  runner_.join();
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

}  // namespace
}  // namespace vela
