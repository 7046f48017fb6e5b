// HttpServer: `vela serve`'s HTTP front end over one Engine. Routes: POST /v1/chat/completions,
// /v1/completions, /v1/messages, /v1/messages/count_tokens; GET /v1/models, /health, /stats,
// /metrics, /model-card (the model directory's README.md), / (chat page). Cross-cutting: API key (every route but /health and /), body size
// limit (413), admission control (bounded connection queue -> 503, engine queue full -> 429, both
// with Retry-After), error objects in the route's flavor (no exception escapes a handler: 4xx for
// bad requests, 500 with a logged id otherwise), request metrics, graceful shutdown.
//
// Threading: run() blocks in the accept loop; handlers run on a bounded pool of HTTP threads;
// shutdown() may be called from any other thread (e.g. a signal-waiting thread).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "server/server_config.h"
#include "server/server_context.h"
#include "tokenizer/chat_template.h"

namespace httplib {
class Server;
}

namespace vela {

class HttpServer {
 public:
  // The engine must have a tokenizer. `tpl` is the model's chat template (chat routes answer 400
  // without one). Throws InvalidArgument for a bad config.
  HttpServer(Engine& engine, const ServerConfig& cfg, std::optional<ChatTemplate> tpl);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds cfg.host:cfg.port (port 0 picks a free one); returns the port. Throws IoError.
  int bind();
  // Serves until shutdown() completes. Returns false if the accept loop failed.
  bool run();
  // Graceful: new requests get 503; in-flight ones may finish for cfg.shutdown_grace_s, then are
  // cancelled (they end with finish_reason "abort"); then the accept loop stops. Idempotent.
  void shutdown();

  ServerContext& context() { return *ctx_; }
  int port() const { return port_; }

 private:
  std::unique_ptr<ServerContext> ctx_;
  std::unique_ptr<httplib::Server> svr_;
  int port_ = -1;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
  void install_routes();
};

}  // namespace vela
