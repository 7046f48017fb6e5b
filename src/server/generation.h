// Generation: submitting one engine request for an API call and reading its events the way an
// HTTP handler must — with the context-length check and admission control in front (400 / 429 /
// 503 as ApiError), metrics (TTFT, inter-token latency, token totals) on the way, and
// cancellation within one engine step when the client disconnects or the server shuts down.
// A GenerationSession is used by one thread at a time; the destructor cancels an unfinished
// request, so no path leaves a task decoding for nobody.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "engine/request.h"
#include "server/client_connection.h"
#include "server/server_context.h"

namespace vela {

using Clock = std::chrono::steady_clock;

// The max_tokens a request gets: the given one, or the rest of the context when absent.
// Throws ApiError 400 (context_length_exceeded) when the prompt and max_tokens do not fit.
int32_t resolve_max_tokens(const ServerContext& ctx, size_t prompt_tokens,
                           std::optional<int32_t> requested);

class GenerationSession {
 public:
  enum class Poll { kEvent, kTimeout, kDone };

  // Submits; throws ApiError 503 (shutting down), 429 (queue full) or 400 (engine refusal).
  GenerationSession(ServerContext& ctx, Request request, ClientConnection conn,
                    Clock::time_point arrival);
  ~GenerationSession();
  GenerationSession(const GenerationSession&) = delete;
  GenerationSession& operator=(const GenerationSession&) = delete;

  // Blocking: the next event, false at the end.
  bool next(StreamEvent& ev);
  // Waits up to timeout_ms for the next event.
  Poll poll(StreamEvent& ev, int64_t timeout_ms);
  // After the end: the accumulated result (final completions, prompt token count).
  RequestResult result();
  void cancel();
  // Event-driven readers: `fn` runs (on the engine's thread) after each new event; see
  // RequestHandle::set_listener. poll(ev, 0) then reads without blocking.
  void set_listener(std::function<void()> fn) { handle_->set_listener(std::move(fn)); }
  // The client went away (checked by poll / next, or a failed write reported by the caller).
  bool client_gone() const { return client_gone_; }
  void mark_client_gone();
  int32_t prompt_tokens() const { return prompt_tokens_; }

 private:
  ServerContext& ctx_;
  RequestHandlePtr handle_;
  ClientConnection conn_;
  Clock::time_point arrival_, last_token_;
  int32_t prompt_tokens_ = 0;
  int64_t n_generated_ = 0;
  bool first_token_seen_ = false, done_ = false, client_gone_ = false, cancelled_ = false;
  std::optional<RequestResult> result_;
  void observe(const StreamEvent& ev);
  void check_abandon();
};

}  // namespace vela
