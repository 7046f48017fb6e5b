// VELA_* environment switches (core/env.h).
#include "core/env.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace vela {

bool env_enabled(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || v[0] != '0';
}

bool env_opted_in(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '1';
}

int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  VELA_CHECK(end != v && *end == '\0' && errno == 0, name, "=", v, ": expected an integer");
  return std::clamp<int64_t>(x, lo, hi);
}

}  // namespace vela
