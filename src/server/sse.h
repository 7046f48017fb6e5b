// Server-sent events (text/event-stream): framing — `data: <json>\n\n`, optionally preceded by
// `event: <name>\n` (Anthropic names every event; OpenAI does not and ends with `data: [DONE]`) —
// and SseStream, the event-driven body of a streamed response.
//
// An SseStream never blocks a thread (the same machinery carries non-streaming generations, whose
// response is built when they end: defer_response): the HTTP layer calls pump() on the connection's
// I/O strand whenever an engine event may be ready (each session's handle wakes it), and pump()
// runs the handler's callbacks for every event that is there, then returns. The callbacks are the
// handler's formatting code; each returns false once a write failed (the client is gone), after
// which the stream only drains its (cancelled) sessions and ends.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "engine/request.h"

namespace vela {

class GenerationSession;
struct HttpResponse;

std::string sse_data(const json& payload);
std::string sse_event(const std::string& name, const json& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// Where a stream's bytes go (the HTTP layer's chunked writer). write() is false once the client
// is gone.
class SseWriter {
 public:
  virtual ~SseWriter() = default;
  virtual bool write(std::string_view data) = 0;
};

// What a streaming handler hands the HTTP layer. `state` owns what the callbacks use (the
// sessions included); the callbacks run one at a time, on an I/O thread.
// A non-streaming handler hands the same (defer_response): on_event only accumulates (it gets a
// writer that must not be used), and `respond` fills the whole response once every session has
// finished (it may throw ApiError, rendered like a handler's).
struct SseCallbacks {
  std::vector<GenerationSession*> sessions;
  std::function<bool(SseWriter&)> on_start;  // optional: before any event
  std::function<bool(size_t session, const StreamEvent&, SseWriter&)> on_event;
  std::function<bool(SseWriter&)> on_end;  // after every session finished (not if a write failed)
  std::function<void(HttpResponse&)> respond;  // set: a deferred, non-streaming response
  std::shared_ptr<void> state;
};

class SseStream {
 public:
  explicit SseStream(SseCallbacks cb) : cb_(std::move(cb)), done_(cb_.sessions.size(), false) {}
  ~SseStream();
  // Arranges for `wake` to run (from any thread) whenever pump() may have work: an engine event
  // on any session. Call once, before the first pump().
  void set_wake(std::function<void()> wake);
  // Runs the callbacks for every ready event; never blocks. True once the stream has ended.
  bool pump(SseWriter& w);
  // A deferred non-streaming response: after pump() returned true, respond() fills it.
  bool deferred() const { return static_cast<bool>(cb_.respond); }
  void respond(HttpResponse& res) { cb_.respond(res); }

 private:
  SseCallbacks cb_;
  std::vector<bool> done_;
  bool started_ = false, gone_ = false, ended_ = false;
};

// Makes `res` an SSE response with these callbacks.
void start_sse_stream(HttpResponse& res, SseCallbacks cb);
// Makes `res` a response that cb.respond fills once the sessions finish (no thread waits).
void defer_response(HttpResponse& res, SseCallbacks cb);

}  // namespace vela
