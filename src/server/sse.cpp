// SSE framing and SseStream's pump. JSON payloads are single-line (dump without indent), so no
// `data:` continuation lines are needed; invalid UTF-8 from a model is replaced, never thrown.
#include "server/sse.h"

#include "server/api_error.h"
#include "server/generation.h"
#include "server/http_message.h"

namespace vela {

std::string sse_data(const json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

std::string sse_event(const std::string& name, const json& payload) {
  return "event: " + name + "\ndata: " + dump_json(payload) + "\n\n";
}

SseStream::~SseStream() {
  for (GenerationSession* s : cb_.sessions) s->set_listener(nullptr);
}

void SseStream::set_wake(std::function<void()> wake) {
  for (GenerationSession* s : cb_.sessions) s->set_listener(wake);
}

bool SseStream::pump(SseWriter& w) {
  if (ended_) return true;
  if (!started_) {
    started_ = true;
    if (cb_.on_start && !cb_.on_start(w)) gone_ = true;
  }
  size_t n_done = 0;
  for (size_t i = 0; i < cb_.sessions.size(); ++i) {
    GenerationSession& s = *cb_.sessions[i];
    while (!done_[i]) {
      if (gone_ && !s.client_gone()) s.mark_client_gone();
      StreamEvent ev;
      GenerationSession::Poll r = s.poll(ev, 0);
      if (r == GenerationSession::Poll::kTimeout) break;
      if (r == GenerationSession::Poll::kDone) {
        done_[i] = true;
        break;
      }
      if (!gone_ && !cb_.on_event(i, ev, w)) gone_ = true;
    }
    if (done_[i]) ++n_done;
  }
  if (n_done < cb_.sessions.size()) return false;
  if (!gone_ && cb_.on_end && !cb_.respond) cb_.on_end(w);
  ended_ = true;
  return true;
}

void start_sse_stream(HttpResponse& res, SseCallbacks cb) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.content_type = "text/event-stream";
  res.stream = std::make_shared<SseStream>(std::move(cb));
}

void defer_response(HttpResponse& res, SseCallbacks cb) {
  VELA_CHECK(static_cast<bool>(cb.respond), "defer_response needs a respond callback");
  res.stream = std::make_shared<SseStream>(std::move(cb));
}

}  // namespace vela
