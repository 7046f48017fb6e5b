// ServerContext: what every route handler shares — the engine, tokenizer, chat template, config,
// tool-call dialect, metrics, and the registry of in-flight generations that shutdown cancels.
// Owned by HttpServer; handlers run on many HTTP threads at once, so everything here is thread-safe
// or immutable.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "engine/engine.h"
#include "server/metrics.h"
#include "server/server_config.h"
#include "server/tool_call_dialect.h"
#include "tokenizer/chat_template.h"

namespace vela {

struct ServerContext {
  ServerContext(Engine& e, ServerConfig c, std::optional<ChatTemplate> tpl)
      : engine(e),
        cfg(std::move(c)),
        chat_template(std::move(tpl)),
        tool_dialect(choose_tool_call_dialect(
            cfg.tool_call_parser, chat_template ? &chat_template->source() : nullptr)) {}

  Engine& engine;
  const ServerConfig cfg;
  const std::optional<ChatTemplate> chat_template;
  const ToolCallDialect tool_dialect;  // how the model writes tool calls (tool_call_dialect.h)
  Metrics metrics;

  std::atomic<bool> draining{false};    // shutting down: new requests get 503
  std::atomic<bool> cancel_all{false};  // grace period over: in-flight requests are cancelled

  // In-flight generations (for shutdown and the in-flight gauge).
  void add(const RequestHandlePtr& h);
  void remove(const RequestHandlePtr& h);
  int64_t n_in_flight() const;
  void cancel_in_flight();

  const Tokenizer& tokenizer() const { return *engine.tokenizer(); }

 private:
  mutable std::mutex mu_;
  std::set<RequestHandlePtr> in_flight_;
};

}  // namespace vela
