// Built-in trainer callbacks: progress lines and the metrics log; see callbacks.h.
#include "train/callbacks.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "train/trainer.h"

namespace vela {
namespace fs = std::filesystem;

json StepMetrics::to_json() const {
  json j{{"step", step},
         {"epoch", epoch},
         {"loss", std::isfinite(loss) ? json(loss) : json(nullptr)},
         {"lr", lr},
         {"grad_norm", std::isfinite(grad_norm) ? json(grad_norm) : json(nullptr)},
         {"tokens", n_tokens},
         {"target_tokens", n_target_tokens},
         {"step_seconds", step_seconds},
         {"tokens_per_second", tokens_per_second}};
  if (skipped) j["skipped"] = true;
  for (const auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

namespace {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
  return buf;
}

}  // namespace

void ProgressCallback::on_train_begin(Trainer& t) {
  start_ = std::chrono::steady_clock::now();
  start_step_ = t.step();
  std::fprintf(stderr, "[train] steps %lld -> %lld, %lld tokens per step\n",
               static_cast<long long>(t.step()), static_cast<long long>(t.total_steps()),
               static_cast<long long>(t.dataset().batch_size() * t.dataset().seq_len() *
                                      t.config().grad_accum));
}

void ProgressCallback::after_optimizer_step(Trainer& t, const StepMetrics& m) {
  window_seconds_ += m.step_seconds;
  window_tokens_ += m.n_tokens;
  window_loss_sum_ += m.loss;
  ++window_steps_;
  if (m.step % every_ != 0 && m.step != t.total_steps()) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double per_step = elapsed / static_cast<double>(std::max<int64_t>(1, m.step - start_step_));
  const double eta = per_step * static_cast<double>(t.total_steps() - m.step);
  const double tps = window_seconds_ > 0 ? window_tokens_ / window_seconds_ : 0;
  const double tflops = tps * t.flops_per_token() / 1e12;
  std::string extra;
  for (const char* k : {"pref_acc", "reward_margin", "reward_mean", "kl", "n_stale",
                        "router_aux_loss", "moe_load_max"}) {
    if (!m.extra.contains(k) || !m.extra[k].is_number()) continue;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "  %s %.4g", k, m.extra[k].get<double>());
    extra += buf;
  }
  std::fprintf(stderr,
               "[train] step %lld/%lld  epoch %lld  loss %.4f%s  lr %.3g  gnorm %.3g  %.0f tok/s  "
               "%.2f TFLOP/s  ETA %s%s\n",
               static_cast<long long>(m.step), static_cast<long long>(t.total_steps()),
               static_cast<long long>(m.epoch), window_loss_sum_ / window_steps_, extra.c_str(),
               m.lr, m.grad_norm,
               tps, tflops, format_duration(eta).c_str(),
               m.skipped ? "  (step skipped: non-finite gradients)" : "");
  window_seconds_ = 0;
  window_tokens_ = 0;
  window_loss_sum_ = 0;
  window_steps_ = 0;
}

void ProgressCallback::on_validation(Trainer&, int64_t step, double loss) {
  std::fprintf(stderr, "[train] step %lld  validation loss %.4f\n", static_cast<long long>(step),
               loss);
}

void ProgressCallback::on_train_end(Trainer& t) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "[train] done: %lld steps in %s\n",
               static_cast<long long>(t.step() - start_step_), format_duration(elapsed).c_str());
}

MetricsCallback::MetricsCallback(std::string path, int64_t every, int64_t rewind_to)
    : path_(std::move(path)), every_(every < 1 ? 1 : every), rewind_to_(rewind_to) {}

void MetricsCallback::truncate_after(int64_t step) {
  if (!fs::exists(path_)) return;
  std::ifstream in(path_);
  std::string kept, line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      if (json::parse(line).value("step", int64_t{0}) > step) continue;
    } catch (const json::exception&) {
      continue;  // a torn last line
    }
    kept += line + "\n";
  }
  in.close();
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    VELA_CHECK_T(IoError, out.good(), "cannot rewrite ", path_);
  }
  fs::rename(tmp, path_);
}

void MetricsCallback::after_optimizer_step(Trainer&, const StepMetrics& m) {
  if (m.step % every_ != 0) return;
  pending_.push_back(m.to_json().dump());
}

void MetricsCallback::on_validation(Trainer&, int64_t step, double loss) {
  pending_.push_back(json{{"step", step}, {"val_loss", loss}}.dump());
}

void MetricsCallback::on_checkpoint(Trainer&, int64_t, const std::string&) { flush(); }
void MetricsCallback::on_train_end(Trainer&) { flush(); }

void MetricsCallback::flush() {
  if (!rewound_) {
    truncate_after(rewind_to_);
    rewound_ = true;
  }
  if (pending_.empty()) return;
  std::string text;
  for (const std::string& l : pending_) text += l + "\n";
  int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  VELA_CHECK_T(IoError, fd >= 0, "cannot open ", path_, " for appending");
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      VELA_THROW(IoError, "write to ", path_, " failed");
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  pending_.clear();
}

}  // namespace vela
