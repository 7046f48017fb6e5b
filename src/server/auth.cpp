// API-key checks.
#include "server/auth.h"

namespace vela {

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

bool api_key_ok(const std::string& expected, const std::string& authorization_header,
                const std::string& x_api_key_header) {
  if (expected.empty()) return true;
  const std::string kBearer = "Bearer ";
  if (authorization_header.size() > kBearer.size() &&
      authorization_header.compare(0, kBearer.size(), kBearer) == 0 &&
      constant_time_equal(authorization_header.substr(kBearer.size()), expected))
    return true;
  return !x_api_key_header.empty() && constant_time_equal(x_api_key_header, expected);
}

}  // namespace vela
