// HttpServer: `vela serve`'s HTTP front end over one Engine. Routes: POST /v1/chat/completions,
// /v1/completions, /v1/messages, /v1/messages/count_tokens; GET /v1/models, /health, /stats,
// /metrics, /model-card (the model directory's README.md), / (chat page). Cross-cutting: API key
// (every route but /health and /), body size limit (413), header / body / idle / write timeouts,
// admission control (over max_connections or a full worker queue -> 503, engine queue full ->
// 429, both with Retry-After), error objects in the route's flavor (no exception escapes a
// handler: 4xx for bad requests, 500 with a logged id otherwise), request metrics, graceful
// shutdown, SSE streaming, cancellation when the client disconnects.
//
// Threading: event-driven I/O on Boost.Asio (HttpConnection; io_threads threads, one of them the
// caller of run()), so idle or slow connections cost no thread. Handlers that may block run on a
// WorkerPool (up to http_threads threads); cheap GET routes run on the I/O threads; generations,
// streamed or not, are pumped on the I/O threads by engine events (no thread waits for one). shutdown() may be called from any other
// thread (e.g. a signal-waiting thread). bind() raises RLIMIT_NOFILE to its hard limit.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "server/server_config.h"
#include "server/server_context.h"
#include "tokenizer/chat_template.h"

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
  // Serves until shutdown() completes. Returns false if serving failed.
  bool run();
  // Graceful: new requests get 503; in-flight ones may finish for cfg.shutdown_grace_s, then are
  // cancelled (they end with finish_reason "abort"); then the listener and every connection close
  // and run() returns. Idempotent.
  void shutdown();

  ServerContext& context();
  int port() const { return port_; }
  int64_t n_connections() const;  // open client connections

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = -1;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace vela
