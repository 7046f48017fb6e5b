// Server-sent events framing (text/event-stream): `data: <json>\n\n`, optionally preceded by
// `event: <name>\n` (Anthropic names every event; OpenAI does not and ends with `data: [DONE]`).
#pragma once

#include <httplib.h>

#include <functional>
#include <string>

#include "core/json.h"

namespace vela {

std::string sse_data(const json& payload);
std::string sse_event(const std::string& name, const json& payload);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// Makes `res` an SSE stream whose body is written by `body` on the HTTP thread after the handler
// returns. `body` returns false when the client is gone (the connection is then dropped).
void start_sse_stream(httplib::Response& res, std::function<bool(httplib::DataSink&)> body);

}  // namespace vela
