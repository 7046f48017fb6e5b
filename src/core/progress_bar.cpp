// ProgressBar: throttled stderr progress with rates and ETA.
#include "core/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace vela {
namespace {

std::string hms(double secs) {
  if (!(secs >= 0) || secs > 359999) return "--:--";
  long s = static_cast<long>(secs + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes, bool enabled, Unit unit)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0),
      unit_(unit),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::update(uint64_t done_bytes, int64_t done_records, bool force) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  auto every = tty_ ? std::chrono::milliseconds(250) : std::chrono::milliseconds(5000);
  if (!force && now - last_draw_ < every) return;
  last_draw_ = now;
  draw(done_bytes, done_records, false);
}

void ProgressBar::finish(uint64_t done_bytes, int64_t done_records) {
  if (!enabled_) return;
  draw(done_bytes, done_records, true);
}

void ProgressBar::draw(uint64_t done_bytes, int64_t done_records, bool final) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double frac =
      total_bytes_ ? static_cast<double>(done_bytes) / static_cast<double>(total_bytes_) : 1.0;
  int width = 24, filled = static_cast<int>(frac * width + 0.5);
  std::string bar(static_cast<size_t>(std::min(filled, width)), '#');
  bar.resize(static_cast<size_t>(width), '.');
  double eta = done_bytes > 0 ? secs * (1.0 - frac) / std::max(frac, 1e-9) : -1;
  if (unit_ == Unit::kItems) {
    double rate = secs > 0 ? static_cast<double>(done_bytes) / secs : 0;
    std::fprintf(stderr, "%s[%s] [%s] %5.1f%% %llu/%llu %.1f it/s %s %s%s", tty_ ? "\r" : "",
                 label_.c_str(), bar.c_str(), 100.0 * frac,
                 static_cast<unsigned long long>(done_bytes),
                 static_cast<unsigned long long>(total_bytes_), rate, final ? "in" : "ETA",
                 hms(final ? secs : eta).c_str(), (final || !tty_) ? "\n" : "\x1b[K");
    std::fflush(stderr);
    return;
  }
  double mb = static_cast<double>(done_bytes) / 1e6;
  double rate_rec = secs > 0 ? static_cast<double>(done_records) / secs : 0;
  double rate_mb = secs > 0 ? mb / secs : 0;
  std::fprintf(stderr, "%s[%s] [%s] %5.1f%% %.1f/%.1f MB %.0f rec/s %.2f MB/s %s %s%s",
               tty_ ? "\r" : "", label_.c_str(), bar.c_str(), 100.0 * frac, mb,
               static_cast<double>(total_bytes_) / 1e6, rate_rec, rate_mb, final ? "in" : "ETA",
               hms(final ? secs : eta).c_str(), (final || !tty_) ? "\n" : "\x1b[K");
  std::fflush(stderr);
}

}  // namespace vela
