// The in-process server of the HTTP tests (test_http_server.cpp, test_spec_server.cpp): a tiny
// random model with the Qwen3 vocabulary behind an Engine, and an HttpServer over it on an
// ephemeral port with the Qwen3 chat template, served on its own thread. Needs the fetched Qwen3
// tokenizer (callers skip without it).
#pragma once

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "core/json.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "server_test_util.h"

namespace vela::test {

// One qwen3 layer of width 32 over the Qwen3 vocabulary.
inline ModelConfig tiny_qwen3_config() {
  json c = {{"model_type", "qwen3"},
            {"vocab_size", qwen3_tokenizer()->vocab_size()},
            {"hidden_size", 32},
            {"intermediate_size", 64},
            {"num_hidden_layers", 1},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"head_dim", 8},
            {"max_position_embeddings", 4096},
            {"tie_word_embeddings", true},
            {"eos_token_id", json::array({151645})}};
  return ModelConfig::from_json(c, "test");
}

// The tiny model's random weights (seed 3: the same every call).
inline Transformer tiny_qwen3_model() {
  return Transformer::random(tiny_qwen3_config(), DType::kF32, Device::cpu(), 3);
}

// An Engine over the tiny model and the Qwen3 tokenizer; draft: a draft model, or null.
inline std::unique_ptr<Engine> tiny_engine(const EngineConfig& cfg,
                                           std::unique_ptr<Transformer> draft = nullptr) {
  return std::make_unique<Engine>(
      tiny_qwen3_model(), std::make_unique<Tokenizer>(Tokenizer::from_file(qwen3_dir().string())),
      cfg, std::move(draft));
}

// An HttpServer (model name "tiny") over `engine` on an ephemeral port, run on its own thread
// from construction; stop() or the destructor (so an ASSERT that returns early too) shuts it down
// and joins.
class ServerThread {
 public:
  explicit ServerThread(Engine& engine, ServerConfig sc = {})
      : server_(engine, local(std::move(sc)),
                ChatTemplate::from_tokenizer_config(qwen3_dir().string())) {
    port_ = server_.bind();
    runner_ = std::thread([this] { server_.run(); });
  }
  ~ServerThread() { stop(); }
  ServerThread(const ServerThread&) = delete;
  ServerThread& operator=(const ServerThread&) = delete;

  void stop() {
    server_.shutdown();
    if (runner_.joinable()) runner_.join();
  }
  HttpServer& server() { return server_; }
  int port() const { return port_; }
  // A client with a 60 s read timeout; key: its bearer token, if any.
  httplib::Client client(const std::string& key = "") const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    if (!key.empty()) c.set_bearer_token_auth(key.c_str());
    return c;
  }

 private:
  static ServerConfig local(ServerConfig sc) {
    sc.port = 0;
    sc.model_name = "tiny";
    return sc;
  }

  HttpServer server_;
  int port_ = 0;
  std::thread runner_;
};

}  // namespace vela::test
