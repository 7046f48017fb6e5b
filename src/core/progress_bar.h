// ProgressBar: a one-line progress display on stderr for long jobs. In bytes mode (data jobs such
// as `vela preprocess`): percent of input bytes, records/s, MB/s and the ETA by bytes. In items
// mode
// (`vela eval`): done/total items, items/s and the ETA by items. Redraws at most every 250 ms (with
// '\r' on a terminal, as plain lines every few seconds otherwise, so logs stay readable). Not
// thread-safe: one owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace vela {

class ProgressBar {
 public:
  enum class Unit { kBytes, kItems };
  // total: bytes or items (by `unit`); in items mode the `done_bytes` arguments below are items.
  ProgressBar(std::string label, uint64_t total_bytes, bool enabled, Unit unit = Unit::kBytes);
  // Absolute progress so far.
  void update(uint64_t done_bytes, int64_t done_records, bool force = false);
  void finish(uint64_t done_bytes, int64_t done_records);

 private:
  void draw(uint64_t done_bytes, int64_t done_records, bool final);
  std::string label_;
  uint64_t total_bytes_;
  bool enabled_, tty_;
  Unit unit_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace vela
