// The OpenAI-compatible routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models.
// Handlers fill the HttpResponse (JSON, or an SSE stream that ends with `data: [DONE]`) and
// throw ApiError for every refused request; HttpServer renders those as OpenAI error objects.
#pragma once

#include "server/http_message.h"
#include "server/server_context.h"

namespace vela {

void handle_chat_completions(ServerContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_completions(ServerContext& ctx, const HttpRequest& req, HttpResponse& res);
json models_list(const ServerContext& ctx);

}  // namespace vela
