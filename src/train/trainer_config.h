// TrainerConfig: everything `vela train` reads from train.json (docs/training.md is the reference).
// Top-level keys are the members below; "data", "optimizer" and "schedule" are the nested configs
// of train/data/dataset.h, train/optim/optimizer.h and train/lr_schedule.h. Parsing is strict: an
// unknown key or a wrong type is an InvalidArgument naming the key.
#pragma once

#include <cstdint>
#include <string>

#include "core/json.h"
#include "model/model_config.h"
#include "train/data/dataset.h"
#include "train/data_parallel.h"
#include "train/lr_schedule.h"
#include "train/optim/optimizer.h"
#include "train/strategies/strategy_config.h"
#include "train/trainable_model.h"

namespace vela {

struct TrainerConfig {
  // The objective (train/strategies/strategy.h): "seq" | "sft" | "dpo" | "grpo". "" = from
  // data.kind (seq -> seq, sft -> sft, pair -> dpo, prompt -> grpo); when data.kind is not given
  // it follows the strategy (dpo -> pair, grpo -> prompt, sft -> sft).
  std::string strategy;
  std::string out_dir;  // checkpoints (step-N/), metrics.jsonl, train_config.json
  // The model, one of: a config (config.json path, a directory holding one, or a preset name:
  // tiny, 100m, bench-1b) trained from random init; or init_from, a checkpoint or HF model
  // directory whose weights start the run.
  std::string model;
  std::string init_from;
  bool resume = false;         // continue from the latest checkpoint in out_dir (if any)
  std::string tokenizer;       // directory whose tokenizer files are copied into checkpoints
                               // ("" = the one recorded in the data's index.json, if present)
  std::string device = "cpu";  // cpu | cuda | cuda:N
  std::string dtype = "f32";   // compute weights: f32 | bf16 (masters and moments stay f32)
  uint64_t seed = 0;           // model init and the trainer's RNG
  double init_std = 0.02;      // random init: normal(0, init_std) projections
  int64_t epochs = 1;
  int64_t max_steps = 0;           // optimizer steps; 0 = epochs * (batches per epoch / grad_accum)
  int64_t grad_accum = 1;          // micro-batches per optimizer step
  double max_grad_norm = 1.0;      // global-norm clipping; <= 0 turns it off
  int64_t log_every = 10;          // progress line and metrics record every N steps
  int64_t eval_every = 0;          // validation every N steps (0 = only at the end, if any data)
  int64_t eval_batches = 0;        // validation batches per pass (0 = the whole validation set)
  int64_t save_every = 0;          // checkpoint every N steps (0 = only at the end)
  bool save_final = true;          // checkpoint after the last step
  int64_t keep_last = 0;           // keep only the newest N published checkpoints (0 = all)
  bool verify_checkpoints = true;  // sha256 check when resuming / init_from a checkpoint
  bool progress = true;            // progress lines on stderr
  int threads = 0;                 // CPU threads (0 = OpenMP default)
  TrainOptions train;              // activation_checkpointing, label_smoothing, ce_chunk_tokens,
                                   // lora ("lora": {"r", "alpha", "dropout", "target_modules"})
  // Data parallel (docs/distributed.md): "zero": 1 shards the optimizer state over the ranks,
  // "bucket_mb" sizes the gradient buckets. The ranks themselves come from the environment
  // (RANK / WORLD_SIZE / ..., mpirun, or `vela train --nproc-per-node N`), not from this file.
  DataParallelConfig data_parallel;
  DatasetConfig data;
  OptimizerConfig optimizer;
  LrScheduleConfig schedule;
  DpoConfig dpo;
  GrpoConfig grpo;

  static TrainerConfig from_json(const json& j);
  json to_json() const;
  // strategy, or the one data.kind implies when it is "".
  std::string effective_strategy() const;
  void validate() const;
};

// Resolves TrainerConfig::model: a preset name, a config.json path or a directory holding one.
ModelConfig resolve_model_config(const std::string& model);

}  // namespace vela
