// Trainer: the training loop of `vela train` (ARCHITECTURE §6). Epochs -> batches from a Dataset,
// gradient accumulation (each micro-batch's loss scaled by its share of the step's target tokens,
// so the accumulated gradient is that of the mean loss over the whole step), global-norm clipping,
// the LR schedule, the optimizer, validation every N steps, crash-safe checkpoints every N steps
// (train/checkpoint.h) and the callbacks of train/callbacks.h.
//
// Resume is exact: a checkpoint holds the model, the optimizer (fp32 masters and moments), the
// schedule step, the data position (epoch, cursor), the RNG state and the step, so N steps straight
// and k steps + restart + N - k steps give the same bits on the CPU.
//
// Data parallel (docs/distributed.md): in a job of several ranks (RANK / WORLD_SIZE or mpirun in
// the environment, or the ProcessGroup given), each rank reads its own rows of every global batch,
// gradients are summed over the ranks (DDP or ZeRO-1, train/data_parallel.h), rank 0 alone writes
// metrics, progress and the model part of checkpoints (ZeRO-1: every rank writes its optimizer
// shard into the same staging directory, so the out_dir must be shared by the ranks).
//
// One thread drives a Trainer; train() may be called once. Construction throws InvalidArgument /
// IoError for a bad config, a missing model or data, or a checkpoint that does not fit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "dist/process_group.h"
#include "model/transformer.h"
#include "train/callbacks.h"
#include "train/data/dataset.h"
#include "train/data_parallel.h"
#include "train/lr_schedule.h"
#include "train/optim/optimizer.h"
#include "train/strategies/strategy.h"
#include "train/trainable_model.h"
#include "train/trainer_config.h"

namespace vela {

class Trainer {
 public:
  // Builds the model (from scratch, init_from, or the latest checkpoint when resuming), the
  // datasets, optimizer and schedule from `config`, and adds the built-in callbacks.
  // `pg`: the job's process group; null = from the environment (dist/dist_env.h), a world of 1
  // when nothing is set.
  explicit Trainer(TrainerConfig config, std::shared_ptr<dist::ProcessGroup> pg = nullptr);
  // With a model and data built by the caller (tests, other training strategies); config.model,
  // init_from and data are not used, resume still is.
  Trainer(TrainerConfig config, std::unique_ptr<Transformer> model, DatasetSplit data);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void add_callback(std::unique_ptr<Callback> callback);
  // Runs until total_steps(); returns the last step's metrics.
  StepMetrics train();

  // Mean validation loss over eval_batches batches (NaN when there is no validation data).
  double validate();
  // Publishes a checkpoint of the current state; returns its path.
  std::string save_checkpoint();

  int64_t step() const { return step_; }
  int64_t total_steps() const { return total_steps_; }
  int64_t resumed_from_step() const { return resumed_from_; }
  const TrainerConfig& config() const { return config_; }
  Transformer& model() { return *model_; }
  TrainableModel& trainable() { return *trainable_; }
  Optimizer& optimizer() { return *optimizer_; }
  LrSchedule& schedule() { return *schedule_; }
  Dataset& dataset() { return *data_.train; }
  Dataset* validation_dataset() { return data_.validation.get(); }
  Rng& rng() { return rng_; }
  Strategy& strategy() { return *strategy_; }
  dist::ProcessGroup& process_group() { return *pg_; }
  int rank() const { return pg_->rank(); }
  int world_size() const { return pg_->world_size(); }
  // Null in a world of 1.
  DataParallel* data_parallel() { return dp_.get(); }
  // Whether the model was built from config.model / init_from (false: handed to the constructor).
  bool model_from_config() const { return model_from_config_; }
  // Model FLOPs per trained token by TARGETS.md's convention (6 N + 12 L H T), for MFU.
  double flops_per_token() const;

 private:
  void init(bool model_from_checkpoint);
  json trainer_state() const;
  void restore(const json& state);
  StepMetrics train_step();
  std::vector<std::string> tokenizer_files() const;
  void join_job();  // sets the dataset's rank / world size, cleans checkpoints once
  void maybe_die_for_test() const;

  TrainerConfig config_;
  std::shared_ptr<dist::ProcessGroup> pg_;
  std::unique_ptr<DataParallel> dp_;
  std::string resume_dir_;  // the checkpoint a resume starts from ("" when none)
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<TrainableModel> trainable_;
  DatasetSplit data_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Strategy> strategy_;
  std::vector<std::unique_ptr<Callback>> callbacks_;
  class MetricsCallback* metrics_ = nullptr;  // owned by callbacks_
  Rng rng_;
  int64_t step_ = 0;
  int64_t total_steps_ = 0;
  int64_t resumed_from_ = -1;
  int64_t epoch_ = -1;  // epoch of the last micro-batch drawn (-1 before the first)
  int64_t last_saved_step_ = -1;
  bool trained_ = false;
  bool model_from_config_ = false;
};

}  // namespace vela
