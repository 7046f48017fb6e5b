// API-key authentication: `Authorization: Bearer <key>` (OpenAI clients) or `x-api-key: <key>`
// (Anthropic clients). The comparison takes the same time wherever the keys differ.
#pragma once

#include <string>

namespace vela {

// True when no key is configured, or the request carries it in either header.
bool api_key_ok(const std::string& expected, const std::string& authorization_header,
                const std::string& x_api_key_header);

// Constant-time string equality (length is not secret).
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace vela
