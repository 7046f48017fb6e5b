// Trainer callbacks: the hook points of a training run and the built-in callbacks.
//
// Hooks, in the order a run calls them:
//   on_train_begin                     once, after the model, data and optimizer are ready (and a
//                                      resume restored them)
//   on_epoch_begin(epoch)              when the data enters an epoch (also the resumed one)
//   on_batch_begin / on_batch_end      around each micro-batch's forward + backward
//   before_optimizer_step              gradients accumulated and clipped, before the update
//   after_optimizer_step               after the update; StepMetrics of the step are final
//   on_validation(step, loss)          after a validation pass
//   on_checkpoint(step, path)          after a checkpoint is published
//   on_epoch_end(epoch)                when the data leaves an epoch
//   on_error(what)                     an exception is escaping train(); then it propagates
//   on_train_end                       once, after the last step (not after an error)
// A callback runs on the trainer's thread and may throw (that ends the run through on_error).
//
// Built-ins: ProgressCallback (stderr: step, loss, lr, tokens/s, ETA) and MetricsCallback
// (metrics.jsonl in the output directory, one JSON object per logged step / validation; lines
// are buffered and appended + fsync'd when a checkpoint is published and at the end, so the file
// on disk never runs ahead of the latest checkpoint; a resume drops lines past its step).
// Validation every N steps and checkpointing every N steps are the trainer's own (trainer.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela {

class Trainer;

// What one optimizer step did.
struct StepMetrics {
  int64_t step = 0;             // optimizer steps completed, this one included
  int64_t epoch = 0;            // epoch of the step's last micro-batch
  double loss = 0;              // mean loss over the step's target tokens
  double lr = 0;                // learning rate the step used
  double grad_norm = 0;         // global grad norm before clipping
  bool skipped = false;         // non-finite gradients: no update was applied
  int64_t n_tokens = 0;         // input tokens (batch * seq * grad_accum)
  int64_t n_target_tokens = 0;  // tokens with a loss
  double step_seconds = 0;      // wall time of the step
  double tokens_per_second = 0;
  json extra = json::object();  // the strategy's metrics (pref_acc, reward_mean, ...)

  json to_json() const;
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(Trainer&) {}
  virtual void on_epoch_begin(Trainer&, int64_t /*epoch*/) {}
  virtual void on_batch_begin(Trainer&, int64_t /*micro_idx*/) {}
  virtual void on_batch_end(Trainer&, int64_t /*micro_idx*/, double /*micro_loss*/) {}
  virtual void before_optimizer_step(Trainer&) {}
  virtual void after_optimizer_step(Trainer&, const StepMetrics&) {}
  virtual void on_validation(Trainer&, int64_t /*step*/, double /*loss*/) {}
  virtual void on_checkpoint(Trainer&, int64_t /*step*/, const std::string& /*path*/) {}
  virtual void on_epoch_end(Trainer&, int64_t /*epoch*/) {}
  virtual void on_error(Trainer&, const std::string& /*what*/) {}
  virtual void on_train_end(Trainer&) {}
};

// One stderr line every `every` steps (and at the last step): step/total, epoch, loss, lr,
// grad norm, tokens/s (mean over the lines's window), ETA, and validation loss when one ran.
class ProgressCallback : public Callback {
 public:
  explicit ProgressCallback(int64_t every) : every_(every < 1 ? 1 : every) {}
  void on_train_begin(Trainer& t) override;
  void after_optimizer_step(Trainer& t, const StepMetrics& m) override;
  void on_validation(Trainer& t, int64_t step, double loss) override;
  void on_train_end(Trainer& t) override;

 private:
  int64_t every_;
  double window_seconds_ = 0;
  int64_t window_tokens_ = 0;
  double window_loss_sum_ = 0;
  int64_t window_steps_ = 0;
  std::chrono::steady_clock::time_point start_;
  int64_t start_step_ = 0;
};

// metrics.jsonl writer (see the file comment). Records every `every`-th step and every validation.
class MetricsCallback : public Callback {
 public:
  // `rewind_to`: the step this run starts from (-1 for a fresh run); the first flush drops the
  // existing lines past it (a resumed run rewinds the log to its checkpoint, a fresh run into the
  // same directory replaces it), so a run killed before its first checkpoint changes nothing.
  MetricsCallback(std::string path, int64_t every, int64_t rewind_to = -1);
  // Drops the lines of steps after `step`.
  void truncate_after(int64_t step);
  void after_optimizer_step(Trainer& t, const StepMetrics& m) override;
  void on_validation(Trainer& t, int64_t step, double loss) override;
  void on_checkpoint(Trainer& t, int64_t step, const std::string& path) override;
  void on_train_end(Trainer& t) override;
  void flush();

 private:
  std::string path_;
  int64_t every_;
  int64_t rewind_to_;
  bool rewound_ = false;
  std::vector<std::string> pending_;
};

}  // namespace vela
