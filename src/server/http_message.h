// HttpRequest / HttpResponse: the server's own small view of one HTTP exchange — what route
// handlers read and fill. The HTTP layer (http_connection.cpp, on Boost.Beast) parses into an
// HttpRequest and writes the HttpResponse; handlers never see the library. A response is either a
// complete body or an SSE stream driven by engine events (SseStream, sse.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/client_connection.h"

namespace vela {

class SseStream;

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string path;                                          // percent-decoded, without the query
  std::map<std::string, std::string> params;                 // query parameters, decoded
  std::vector<std::pair<std::string, std::string>> headers;  // as received
  std::string body;
  ClientConnection client;  // marked gone when the peer leaves while this request is answered

  // The first header of that name (case-insensitive), "" when absent.
  std::string header(std::string_view name) const;
  bool has_param(const std::string& key) const { return params.count(key) != 0; }
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type / -Length
  std::string content_type = "text/plain";
  std::string body;
  std::shared_ptr<SseStream> stream;  // set: the body is this event stream (chunked)

  void set_header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
};

// Splits a request target into its decoded path and query parameters. False when the target is
// not origin-form ("/..."), or a percent escape is malformed.
bool parse_target(std::string_view target, std::string& path,
                  std::map<std::string, std::string>& params);

}  // namespace vela
