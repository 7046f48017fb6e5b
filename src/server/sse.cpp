// SSE framing. JSON payloads are single-line (dump without indent), so no `data:` continuation
// lines are needed; invalid UTF-8 from a model is replaced, never thrown.
#include "server/sse.h"

#include <memory>

#include "server/api_error.h"

namespace vela {

std::string sse_data(const json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

std::string sse_event(const std::string& name, const json& payload) {
  return "event: " + name + "\ndata: " + dump_json(payload) + "\n\n";
}

void start_sse_stream(httplib::Response& res, std::function<bool(httplib::DataSink&)> body) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto fn = std::make_shared<std::function<bool(httplib::DataSink&)>>(std::move(body));
  res.set_chunked_content_provider("text/event-stream", [fn](size_t, httplib::DataSink& sink) {
    bool ok = (*fn)(sink);
    if (ok) sink.done();
    return ok;  // false: the client is gone, httplib drops the connection
  });
}

}  // namespace vela
