// The Anthropic-compatible routes: POST /v1/messages (JSON or the full SSE event sequence:
// message_start, content_block_start / _delta / _stop per block, message_delta, message_stop)
// and POST /v1/messages/count_tokens. Refusals throw ApiError; HttpServer renders them as
// Anthropic error objects on these routes.
#pragma once

#include "server/http_message.h"
#include "server/server_context.h"

namespace vela {

void handle_messages(ServerContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_count_tokens(ServerContext& ctx, const HttpRequest& req, HttpResponse& res);

}  // namespace vela
