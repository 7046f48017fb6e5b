// GenerationSession: submit, poll in short slices (20 ms, far below one decode step on a busy
// server) and between slices look for a departed client or a shutdown.
#include "server/generation.h"

#include "core/log.h"
#include "server/api_error.h"

namespace vela {

namespace {
constexpr int64_t kSliceMs = 20;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

void ServerContext::add(const RequestHandlePtr& h) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.insert(h);
  metrics.set_in_flight(static_cast<int64_t>(in_flight_.size()));
}

void ServerContext::remove(const RequestHandlePtr& h) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.erase(h);
  metrics.set_in_flight(static_cast<int64_t>(in_flight_.size()));
}

int64_t ServerContext::n_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(in_flight_.size());
}

void ServerContext::cancel_in_flight() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const RequestHandlePtr& h : in_flight_) h->cancel();
}

int32_t resolve_max_tokens(const ServerContext& ctx, size_t prompt_tokens,
                           std::optional<int32_t> requested) {
  int64_t limit = ctx.engine.max_context();
  int64_t n_prompt = static_cast<int64_t>(prompt_tokens);
  if (requested && *requested < 1)
    throw ApiError(400, "max_tokens must be at least 1, got " + std::to_string(*requested),
                   "max_tokens");
  if (n_prompt >= limit || (requested && n_prompt + *requested > limit)) {
    std::string msg = "This model's maximum context length is " + std::to_string(limit) +
                      " tokens. However, you requested " +
                      std::to_string(n_prompt + (requested ? *requested : 0)) + " tokens (" +
                      std::to_string(n_prompt) + " in the messages, " +
                      std::to_string(requested ? *requested : 0) +
                      " in the completion). Please reduce the length of the messages or "
                      "completion.";
    throw ApiError(400, msg, "messages", "context_length_exceeded");
  }
  return requested ? *requested : static_cast<int32_t>(limit - n_prompt);
}

GenerationSession::GenerationSession(ServerContext& ctx, Request request, ClientConnection conn,
                                     Clock::time_point arrival)
    : ctx_(ctx), conn_(conn), arrival_(arrival) {
  if (ctx.draining.load()) throw ApiError(503, "the server is shutting down");
  if (request.params.n > ctx.cfg.max_n)
    throw ApiError(400,
                   "n must be at most " + std::to_string(ctx.cfg.max_n) + ", got " +
                       std::to_string(request.params.n),
                   "n");
  prompt_tokens_ = static_cast<int32_t>(request.prompt.size());
  try {
    handle_ = ctx.engine.submit(std::move(request));
  } catch (const InvalidArgument& e) {
    throw ApiError(400, clean_error_message(e.what()));
  }
  if (!handle_) {
    ctx.metrics.rejected_overload();
    throw ApiError(429,
                   "the server is at capacity (the engine's waiting queue is full); retry later",
                   "", "queue_full");
  }
  ctx.add(handle_);
  // A departed client stops the engine request at once, even while nobody polls.
  conn_.on_gone([h = std::weak_ptr<RequestHandle>(handle_)] {
    if (auto p = h.lock()) p->cancel();
  });
}

GenerationSession::~GenerationSession() {
  if (!handle_) return;
  if (!done_) {
    handle_->cancel();
    // Drain so the KV pages are back before the handler returns (one step at most).
    StreamEvent ev;
    while (handle_->next(ev)) {
    }
  }
  ctx_.remove(handle_);
  ctx_.metrics.observe_e2e(seconds_since(arrival_));
}

void GenerationSession::mark_client_gone() {
  if (!client_gone_) ctx_.metrics.client_disconnected();
  client_gone_ = true;
  cancel();
}

void GenerationSession::cancel() {
  if (cancelled_) return;
  cancelled_ = true;
  handle_->cancel();
}

void GenerationSession::check_abandon() {
  if (!client_gone_ && conn_.gone()) {
    VELA_LOG_INFO("[server] request ", handle_->id(), ": client disconnected, cancelling");
    mark_client_gone();
  }
  if (ctx_.cancel_all.load()) cancel();
}

void GenerationSession::observe(const StreamEvent& ev) {
  if (ev.tokens.empty()) return;
  Clock::time_point now = Clock::now();
  if (!first_token_seen_) {
    first_token_seen_ = true;
    ctx_.metrics.observe_ttft(std::chrono::duration<double>(now - arrival_).count());
  } else {
    double gap = std::chrono::duration<double>(now - last_token_).count();
    ctx_.metrics.observe_itl(gap / static_cast<double>(ev.tokens.size()));
  }
  last_token_ = now;
  n_generated_ += static_cast<int64_t>(ev.tokens.size());
}

GenerationSession::Poll GenerationSession::poll(StreamEvent& ev, int64_t timeout_ms) {
  if (done_) return Poll::kDone;
  check_abandon();
  bool timed_out = false;
  if (handle_->next_for(ev, timeout_ms, timed_out)) {
    observe(ev);
    return Poll::kEvent;
  }
  if (timed_out) return Poll::kTimeout;
  done_ = true;
  ctx_.metrics.add_tokens(prompt_tokens_, n_generated_);
  return Poll::kDone;
}

bool GenerationSession::next(StreamEvent& ev) {
  while (true) {
    Poll p = poll(ev, kSliceMs);
    if (p == Poll::kEvent) return true;
    if (p == Poll::kDone) return false;
  }
}

RequestResult GenerationSession::result() {
  if (!result_) result_ = handle_->wait();
  return *result_;
}

}  // namespace vela
