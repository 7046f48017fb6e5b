// ServerConfig: how `vela serve` listens and what it admits — address, API key, request limits,
// HTTP threads and timeouts, shutdown grace — with JSON loading for `--config serve.json` (the same
// keys as the command-line flags, '-' spelled '_'). Engine sizing lives in EngineConfig.
#pragma once

#include <cstdint>
#include <string>

#include "core/json.h"

namespace vela {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                   // 0 = any free port (tests)
  std::string api_key;               // empty = no authentication
  std::string model_name;            // the id /v1/models lists and requests must name
  std::string model_dir;             // the served directory (GET /model-card reads its README.md)
  int64_t max_body_bytes = 8 << 20;  // larger request bodies get 413
  int32_t max_messages = 4096;       // chat messages per request
  int32_t max_n = 16;                // samples per request (also bounded by the engine's max_seqs)
  // Connections cost no thread (event-driven I/O); request handlers (parse, tokenize, submit)
  // run on a worker pool; no worker waits for a generation.
  int32_t http_threads = 16;            // worker threads at most (started on demand)
  int32_t max_pending_requests = 1024;  // requests waiting for a worker; beyond it 503
  int32_t io_threads = 2;              // threads running the sockets (and SSE formatting)
  int32_t max_connections = 16384;     // open connections; beyond it requests get 503
  double header_timeout_s = 10.0;      // a request header must arrive within this
  double body_timeout_s = 30.0;        // ... and its body within this after the header
  double idle_timeout_s = 60.0;        // a kept-alive connection may idle this long
  double write_timeout_s = 30.0;       // a client that reads nothing for this long is dropped
  int32_t retry_after_s = 1;           // Retry-After on 429 / 503
  double shutdown_grace_s = 10.0;      // SIGTERM: in-flight requests may finish for this long
  bool web_ui = true;                  // serve the chat page at /
  std::string tool_call_parser;        // hermes | llama3_json; empty = from the chat template

  // Applies the server keys present in `j` (host, port, api_key, served_model_name,
  // max_body_bytes, max_messages, max_n, http_threads, max_pending_requests, io_threads,
  // max_connections, header_timeout_s, body_timeout_s, idle_timeout_s, write_timeout_s,
  // retry_after_s, shutdown_grace_s, web_ui, tool_call_parser). Throws InvalidArgument on a
  // wrong type or value.
  void apply_json(const json& j);
  void validate() const;
};

}  // namespace vela
