// Logging implementation: level read once from VELA_LOG_LEVEL, one mutex around stderr writes.
#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace vela {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("VELA_LOG_LEVEL");
  if (env == nullptr || *env == '\0') return LogLevel::kWarn;
  try {
    return parse_log_level(env);
  } catch (const Error&) {
    std::fprintf(stderr, "[vela warn] VELA_LOG_LEVEL=%s is not one of debug|info|warn|error|off\n", env);
    return LogLevel::kWarn;
  }
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_ref().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { level_ref().store(static_cast<int>(level)); }

LogLevel parse_log_level(const std::string& s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warn" || s == "warning") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  if (s == "off" || s == "none") return LogLevel::kOff;
  VELA_THROW(InvalidArgument, "unknown log level '", s, "' (expected debug|info|warn|error|off)");
}

void log_write(LogLevel level, const std::string& msg) {
  static std::mutex mu;
  static const char* kTags[] = {"debug", "info", "warn", "error", "off"};
  static const auto t0 = std::chrono::steady_clock::now();
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[vela %s %8.3fs] %s\n", kTags[static_cast<int>(level)], t, msg.c_str());
}

}  // namespace vela
