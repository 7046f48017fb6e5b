// ProgressBar: a one-line progress display on stderr for long data jobs: percent of input bytes,
// records/s, MB/s and the ETA by bytes. Redraws at most every 250 ms (with '\r' on a terminal, as
// plain lines every few seconds otherwise, so logs stay readable). Not thread-safe: one owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace vela {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total_bytes, bool enabled);
  // Absolute progress so far.
  void update(uint64_t done_bytes, int64_t done_records, bool force = false);
  void finish(uint64_t done_bytes, int64_t done_records);

 private:
  void draw(uint64_t done_bytes, int64_t done_records, bool final);
  std::string label_;
  uint64_t total_bytes_;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace vela
