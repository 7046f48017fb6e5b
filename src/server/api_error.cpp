// Error objects in the OpenAI and Anthropic shapes.
#include "server/api_error.h"

#include <regex>

namespace vela {

void throw_bad_request(const std::string& message, const std::string& param) {
  throw ApiError(400, message, param);
}

namespace {

// The error types both APIs name alike; nullptr where they differ.
const char* shared_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    default:
      return status < 500 ? "invalid_request_error" : nullptr;
  }
}

}  // namespace

const char* openai_error_type(int status) {
  if (const char* t = shared_error_type(status)) return t;
  return status == 503 ? "service_unavailable" : "server_error";
}

const char* anthropic_error_type(int status) {
  if (const char* t = shared_error_type(status)) return t;
  return status == 503 || status == 529 ? "overloaded_error" : "api_error";
}

json error_body(ApiFlavor flavor, int status, const std::string& message, const std::string& param,
                const std::string& code) {
  if (flavor == ApiFlavor::kAnthropic) {
    return json{{"type", "error"},
                {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}};
  }
  json err = {{"message", message},
              {"type", openai_error_type(status)},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", code.empty() ? json(nullptr) : json(code)}};
  return json{{"error", err}};
}

std::string clean_error_message(const std::string& what) {
  static const std::regex kSuffix(R"( \[[^\[\]]+:\d+\]$)");
  std::string s = std::regex_replace(what, kSuffix, "");
  return s;
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace vela
