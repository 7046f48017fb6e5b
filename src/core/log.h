// Process-wide logging. Level from VELA_LOG_LEVEL (debug | info | warn | error | off), default warn
// so the tools are quiet; messages go to stderr with a level tag. Thread-safe. Never log in
// kernels or per-token loops.
#pragma once

#include <string>

#include "core/error.h"

namespace vela {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
// Parses "debug", "info", "warn", "error", "off"; throws InvalidArgument otherwise.
LogLevel parse_log_level(const std::string& s);
void log_write(LogLevel level, const std::string& msg);

}  // namespace vela

#define VELA_LOG_AT(level, ...)                                              \
  do {                                                                       \
    if (static_cast<int>(level) >= static_cast<int>(::vela::log_level()))    \
      ::vela::log_write(level, ::vela::detail::concat(__VA_ARGS__));         \
  } while (0)
#define VELA_LOG_DEBUG(...) VELA_LOG_AT(::vela::LogLevel::kDebug, __VA_ARGS__)
#define VELA_LOG_INFO(...) VELA_LOG_AT(::vela::LogLevel::kInfo, __VA_ARGS__)
#define VELA_LOG_WARN(...) VELA_LOG_AT(::vela::LogLevel::kWarn, __VA_ARGS__)
#define VELA_LOG_ERROR(...) VELA_LOG_AT(::vela::LogLevel::kError, __VA_ARGS__)
