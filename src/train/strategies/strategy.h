// Strategy: what `vela train` optimises — one loss over a batch and its metrics, picked by the
// train config's "strategy" (ARCHITECTURE §9):
//   seq   next-token cross-entropy over every real token (pretraining; strategies/seq.h)
//   sft   the same loss over the trained sections only (chat SFT; strategies/sft.h)
//   dpo   preference pairs against a frozen reference: DPO / cDPO / IPO (strategies/dpo.h)
//   grpo  group-relative policy optimisation on rollouts from the in-process engine
//         (strategies/grpo.h, train/rl/)
//
// The Trainer (train/trainer.h) draws the step's micro-batches from the dataset, hands them to
// prepare_step() (GRPO replaces prompts by rollouts there), weighs each micro-batch by its share
// of the step's loss units (tokens for seq / sft / grpo, pairs for dpo) and calls
// forward_backward(), so the accumulated gradient is that of the mean loss over the whole step.
// Per-step metrics (reward_mean, pref_acc, ...) are summed over the micro-batches by the
// strategy and reported through step_metrics() into metrics.jsonl and the progress line. state()
// / restore() ride in the checkpoint's trainer_state.json (exact resume of e.g. a rollout buffer).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "train/train_batch.h"

namespace vela {

class Trainer;
class TrainableModel;
struct TrainerConfig;

// One micro-batch's loss: the unscaled sum over its units and their count.
struct MicroLoss {
  double loss_sum = 0;
  int64_t n_units = 0;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual const char* name() const = 0;
  // The dataset kind (train/data/dataset.h) the strategy trains on.
  virtual const char* data_kind() const = 0;

  // Once the trainer's model, optimizer and data exist (and a resume restored them), before the
  // first step: build references, engines, callbacks.
  virtual void attach(Trainer&) {}
  // Whether the next step draws its micro-batches from the dataset (GRPO reusing held rollouts
  // does not: the data position only moves when prompts are consumed).
  virtual bool draws_data(const Trainer&) const { return true; }
  // The step's micro-batches as drawn from the dataset -> what is trained on (in place).
  virtual void prepare_step(Trainer&, std::vector<TrainBatch>& /*micro*/) {}
  // Loss units of a micro-batch; the trainer scales each micro-batch by its share of the step's.
  virtual int64_t loss_units(const TrainBatch& batch) const = 0;
  // Forward + backward of loss_scale * (mean loss over the batch's units); gradients accumulate.
  virtual MicroLoss forward_backward(TrainableModel& model, const TrainBatch& batch,
                                     float loss_scale) = 0;
  // Forward-only loss of a validation batch (n_units 0 when the strategy has no such loss).
  virtual MicroLoss evaluate(TrainableModel& model, const TrainBatch& batch) = 0;
  // The step's own metrics (means over the step), merged into its metrics.jsonl record.
  virtual json step_metrics() const { return json::object(); }
  // State that must survive a resume (rides in trainer_state.json); restore() gets it back.
  virtual json state() const { return nullptr; }
  virtual void restore(const json& /*state*/) {}
};

// The strategy named by config.strategy ("seq", "sft", "dpo", "grpo"); InvalidArgument for
// another name.
std::unique_ptr<Strategy> make_strategy(const TrainerConfig& config);

}  // namespace vela
