// ServerConfig JSON loading and validation.
#include "server/server_config.h"

#include "core/error.h"
#include "server/tool_call_dialect.h"

namespace vela {

namespace {
template <typename T>
void read(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if constexpr (std::is_same_v<T, std::string>) {
    VELA_CHECK(it->is_string(), "serve config: ", key, " must be a string, got ", it->dump());
  } else if constexpr (std::is_same_v<T, bool>) {
    VELA_CHECK(it->is_boolean(), "serve config: ", key, " must be true or false, got ", it->dump());
  } else if constexpr (std::is_integral_v<T>) {
    VELA_CHECK(it->is_number_integer(), "serve config: ", key, " must be an integer, got ",
               it->dump());
  } else {
    VELA_CHECK(it->is_number(), "serve config: ", key, " must be a number, got ", it->dump());
  }
  out = it->get<T>();
}
}  // namespace

void ServerConfig::apply_json(const json& j) {
  VELA_CHECK(j.is_object(), "serve config must be a JSON object, got ", j.dump());
  read(j, "host", host);
  read(j, "port", port);
  read(j, "api_key", api_key);
  read(j, "served_model_name", model_name);
  read(j, "max_body_bytes", max_body_bytes);
  read(j, "max_messages", max_messages);
  read(j, "max_n", max_n);
  read(j, "http_threads", http_threads);
  read(j, "max_pending_requests", max_pending_requests);
  read(j, "io_threads", io_threads);
  read(j, "max_connections", max_connections);
  read(j, "header_timeout_s", header_timeout_s);
  read(j, "body_timeout_s", body_timeout_s);
  read(j, "idle_timeout_s", idle_timeout_s);
  read(j, "write_timeout_s", write_timeout_s);
  read(j, "retry_after_s", retry_after_s);
  read(j, "shutdown_grace_s", shutdown_grace_s);
  read(j, "web_ui", web_ui);
  read(j, "tool_call_parser", tool_call_parser);
}

void ServerConfig::validate() const {
  VELA_CHECK(!host.empty(), "host must not be empty");
  VELA_CHECK(port >= 0 && port <= 65535, "port must be in [0, 65535], got ", port);
  VELA_CHECK(max_body_bytes >= 1024, "max_body_bytes must be >= 1024, got ", max_body_bytes);
  VELA_CHECK(max_messages >= 1, "max_messages must be >= 1, got ", max_messages);
  VELA_CHECK(max_n >= 1, "max_n must be >= 1, got ", max_n);
  VELA_CHECK(http_threads >= 2 && http_threads <= 4096, "http_threads must be in [2, 4096], got ",
             http_threads);
  VELA_CHECK(max_pending_requests >= 0, "max_pending_requests must be >= 0, got ",
             max_pending_requests);
  VELA_CHECK(io_threads >= 1 && io_threads <= 256, "io_threads must be in [1, 256], got ",
             io_threads);
  VELA_CHECK(max_connections >= 1, "max_connections must be >= 1, got ", max_connections);
  for (auto [name, v] :
       {std::pair{"header_timeout_s", header_timeout_s},
        std::pair{"body_timeout_s", body_timeout_s}, std::pair{"idle_timeout_s", idle_timeout_s},
        std::pair{"write_timeout_s", write_timeout_s}})
    VELA_CHECK(v > 0 && v <= 86400, name, " must be in (0, 86400] seconds, got ", v);
  VELA_CHECK(retry_after_s >= 0, "retry_after_s must be >= 0, got ", retry_after_s);
  if (!tool_call_parser.empty()) parse_tool_call_dialect(tool_call_parser);  // throws if unknown
  VELA_CHECK(shutdown_grace_s >= 0, "shutdown_grace_s must be >= 0, got ", shutdown_grace_s);
}

}  // namespace vela
