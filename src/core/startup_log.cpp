// Start-up phase timing (see startup_log.h).
#include "core/startup_log.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/log.h"

namespace vela {
namespace {

double boot_ms() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// The process start in CLOCK_BOOTTIME milliseconds (field 22 of /proc/self/stat, in clock
// ticks since boot); -1 when unreadable.
double start_boot_ms() {
  static const double start = [] {
    std::ifstream f("/proc/self/stat");
    std::string line;
    if (!std::getline(f, line)) return -1.0;
    // The command name (field 2) is in parentheses and may hold spaces: count from its end.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) return -1.0;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    for (int i = 3; i < 22 && rest >> field; ++i) {
    }
    unsigned long long ticks = 0;
    if (!(rest >> ticks)) return -1.0;
    return static_cast<double>(ticks) * 1e3 / static_cast<double>(sysconf(_SC_CLK_TCK));
  }();
  return start;
}

}  // namespace

double process_uptime_ms() {
  const double start = start_boot_ms();
  return start < 0 ? -1.0 : boot_ms() - start;
}

StartupPhase::StartupPhase(const char* name) : name_(name), start_ms_(boot_ms()) {}

StartupPhase::~StartupPhase() {
  if (log_level() > LogLevel::kDebug) return;
  char buf[160];
  std::snprintf(buf, sizeof(buf), "[startup] %s: %.1f ms (done %.0f ms after process start)", name_,
                boot_ms() - start_ms_, process_uptime_ms());
  log_write(LogLevel::kDebug, buf);
}

void startup_mark(const char* what) {
  if (log_level() > LogLevel::kDebug) return;
  char buf[160];
  std::snprintf(buf, sizeof(buf), "[startup] %s %.0f ms after process start", what,
                process_uptime_ms());
  log_write(LogLevel::kDebug, buf);
}

}  // namespace vela
