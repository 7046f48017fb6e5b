// ApiError: a request the HTTP layer refuses, with the HTTP status and the error object the client
// sees. The same error renders OpenAI-style ({"error": {"message", "type", "param", "code"}}) or
// Anthropic-style ({"type": "error", "error": {"type", "message"}}) depending on the route.
// clean_error_message() strips vela's " [file:line]" suffix from vela::Error texts before they go
// to a client.
#pragma once

#include <string>

#include "core/error.h"
#include "core/json.h"

namespace vela {

enum class ApiFlavor { kOpenAI, kAnthropic };

class ApiError : public Error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string code = "")
      : Error(message),
        status_(status),
        message_(std::move(message)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& message() const { return message_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string message_, param_, code_;
};

// "path.to.field must be ..." helpers used by the request parsers.
[[noreturn]] void throw_bad_request(const std::string& message, const std::string& param = "");

// The error body for `status` in the given flavor.
json error_body(ApiFlavor flavor, int status, const std::string& message,
                const std::string& param = "", const std::string& code = "");
// OpenAI's error "type" for a status (invalid_request_error, authentication_error, ...).
const char* openai_error_type(int status);
// Anthropic's error "type" for a status (invalid_request_error, not_found_error, ...).
const char* anthropic_error_type(int status);

// e.what() of a vela::Error without the trailing " [src/file.cpp:123]".
std::string clean_error_message(const std::string& what);

// JSON text that never throws: invalid UTF-8 in model output is replaced by U+FFFD.
std::string dump_json(const json& j);

}  // namespace vela
