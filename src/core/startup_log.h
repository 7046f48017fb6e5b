// Start-up phases, timed: at VELA_LOG_LEVEL=debug each StartupPhase logs
//   [startup] <name>: <ms> ms (done <ms> ms after process start)
// so where the time to the first token goes (mmap, weight upload, KV allocation, tokenizer, graph
// capture, server bind, first forward) can be read off one run. Phases may overlap (they run on
// different threads). Thread-safe; costs two clock reads when the level is above debug.
#pragma once

namespace vela {

// Milliseconds since this process started (exec), from /proc/self/stat (10 ms resolution of the
// start time); -1 when unavailable.
double process_uptime_ms();

class StartupPhase {
 public:
  explicit StartupPhase(const char* name);
  ~StartupPhase();
  StartupPhase(const StartupPhase&) = delete;
  StartupPhase& operator=(const StartupPhase&) = delete;

 private:
  const char* name_;
  double start_ms_;
};

// Logs one instant (e.g. "first token") with the time since process start.
void startup_mark(const char* what);

}  // namespace vela
