// TrainerConfig parsing and validation, model resolution; see trainer_config.h.
#include "train/trainer_config.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "model/model_presets.h"
#include "train/config_value.h"

namespace vela {
namespace fs = std::filesystem;

TrainerConfig TrainerConfig::from_json(const json& j) {
  VELA_CHECK(j.is_object(), "train config: expected a JSON object, got ", j.dump());
  TrainerConfig c;
  bool data_kind_given = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "strategy")
      read_config_value(v, key, c.strategy);
    else if (key == "dpo")
      c.dpo = DpoConfig::from_json(v);
    else if (key == "grpo")
      c.grpo = GrpoConfig::from_json(v);
    else if (key == "out_dir")
      read_config_value(v, key, c.out_dir);
    else if (key == "model")
      read_config_value(v, key, c.model);
    else if (key == "init_from")
      read_config_value(v, key, c.init_from);
    else if (key == "resume")
      read_config_value(v, key, c.resume);
    else if (key == "tokenizer")
      read_config_value(v, key, c.tokenizer);
    else if (key == "device")
      read_config_value(v, key, c.device);
    else if (key == "dtype")
      read_config_value(v, key, c.dtype);
    else if (key == "seed")
      read_config_value(v, key, c.seed);
    else if (key == "init_std")
      read_config_value(v, key, c.init_std);
    else if (key == "epochs")
      read_config_value(v, key, c.epochs);
    else if (key == "max_steps")
      read_config_value(v, key, c.max_steps);
    else if (key == "grad_accum")
      read_config_value(v, key, c.grad_accum);
    else if (key == "max_grad_norm")
      read_config_value(v, key, c.max_grad_norm);
    else if (key == "log_every")
      read_config_value(v, key, c.log_every);
    else if (key == "eval_every")
      read_config_value(v, key, c.eval_every);
    else if (key == "eval_batches")
      read_config_value(v, key, c.eval_batches);
    else if (key == "save_every")
      read_config_value(v, key, c.save_every);
    else if (key == "save_final")
      read_config_value(v, key, c.save_final);
    else if (key == "keep_last")
      read_config_value(v, key, c.keep_last);
    else if (key == "verify_checkpoints")
      read_config_value(v, key, c.verify_checkpoints);
    else if (key == "progress")
      read_config_value(v, key, c.progress);
    else if (key == "threads")
      read_config_value(v, key, c.threads);
    else if (key == "zero")
      read_config_value(v, key, c.data_parallel.zero);
    else if (key == "bucket_mb")
      read_config_value(v, key, c.data_parallel.bucket_mb);
    else if (key == "activation_checkpointing")
      read_config_value(v, key, c.train.activation_checkpointing);
    else if (key == "label_smoothing")
      read_config_value(v, key, c.train.label_smoothing);
    else if (key == "ce_chunk_tokens")
      read_config_value(v, key, c.train.ce_chunk_tokens);
    else if (key == "lora") {
      c.train.lora = !v.is_null();
      if (c.train.lora) c.train.lora_config = LoraConfig::from_train_json(v);
    } else if (key == "data") {
      c.data = DatasetConfig::from_json(v);
      data_kind_given = v.is_object() && v.contains("kind");
    } else if (key == "optimizer")
      c.optimizer = OptimizerConfig::from_json(v);
    else if (key == "schedule")
      c.schedule = LrScheduleConfig::from_json(v);
    else
      VELA_THROW(InvalidArgument, "train config: unknown key '", key,
                 "' (see docs/training.md for the keys)");
  }
  if (c.strategy.empty()) {
    const std::string& k = c.data.kind;
    c.strategy = k == "pair" ? "dpo" : k == "prompt" ? "grpo" : k;
  } else if (!data_kind_given) {
    if (c.strategy == "dpo") c.data.kind = "pair";
    if (c.strategy == "grpo") c.data.kind = "prompt";
    if (c.strategy == "sft") c.data.kind = "sft";
  }
  return c;
}

json TrainerConfig::to_json() const {
  return json{{"strategy", effective_strategy()},
              {"out_dir", out_dir},
              {"model", model},
              {"init_from", init_from},
              {"resume", resume},
              {"tokenizer", tokenizer},
              {"device", device},
              {"dtype", dtype},
              {"seed", seed},
              {"init_std", init_std},
              {"epochs", epochs},
              {"max_steps", max_steps},
              {"grad_accum", grad_accum},
              {"max_grad_norm", max_grad_norm},
              {"log_every", log_every},
              {"eval_every", eval_every},
              {"eval_batches", eval_batches},
              {"save_every", save_every},
              {"save_final", save_final},
              {"keep_last", keep_last},
              {"verify_checkpoints", verify_checkpoints},
              {"progress", progress},
              {"threads", threads},
              {"zero", data_parallel.zero},
              {"bucket_mb", data_parallel.bucket_mb},
              {"activation_checkpointing", train.activation_checkpointing},
              {"label_smoothing", train.label_smoothing},
              {"ce_chunk_tokens", train.ce_chunk_tokens},
              {"lora", train.lora ? train.lora_config.to_train_json() : json()},
              {"data", data.to_json()},
              {"optimizer", optimizer.to_json()},
              {"schedule", schedule.to_json()},
              {"dpo", dpo.to_json()},
              {"grpo", grpo.to_json()}};
}

void TrainerConfig::validate() const {
  VELA_CHECK(!out_dir.empty(), "train config: out_dir is required (where checkpoints go)");
  VELA_CHECK(dtype == "f32" || dtype == "bf16", "train config: dtype must be f32 or bf16, got '",
             dtype, "'");
  VELA_CHECK(epochs >= 1, "train config: epochs must be >= 1, got ", epochs);
  VELA_CHECK(max_steps >= 0, "train config: max_steps must be >= 0, got ", max_steps);
  VELA_CHECK(grad_accum >= 1, "train config: grad_accum must be >= 1, got ", grad_accum);
  VELA_CHECK(log_every >= 1, "train config: log_every must be >= 1, got ", log_every);
  VELA_CHECK(eval_every >= 0 && save_every >= 0 && eval_batches >= 0 && keep_last >= 0,
             "train config: eval_every, eval_batches, save_every and keep_last must be >= 0");
  VELA_CHECK(init_std > 0, "train config: init_std must be > 0, got ", init_std);
  VELA_CHECK(train.label_smoothing >= 0 && train.label_smoothing < 1,
             "train config: label_smoothing must be in [0, 1), got ", train.label_smoothing);
  VELA_CHECK(train.ce_chunk_tokens >= 1, "train config: ce_chunk_tokens must be >= 1");
  VELA_CHECK(threads >= 0, "train config: threads must be >= 0, got ", threads);
  VELA_CHECK(data_parallel.zero == 0 || data_parallel.zero == 1,
             "train config: zero must be 0 (DDP) or 1 (ZeRO-1: sharded optimizer state), got ",
             data_parallel.zero);
  VELA_CHECK(data_parallel.bucket_mb > 0, "train config: bucket_mb must be > 0, got ",
             data_parallel.bucket_mb);
  optimizer.validate();
  if (train.lora) train.lora_config.validate();
  const std::string s = effective_strategy();
  VELA_CHECK(s == "seq" || s == "sft" || s == "dpo" || s == "grpo",
             "train config: strategy must be \"seq\", \"sft\", \"dpo\" or \"grpo\", got '", s, "'");
  static const std::map<std::string, std::string> kKind = {
      {"seq", "seq"}, {"sft", "sft"}, {"dpo", "pair"}, {"grpo", "prompt"}};
  VELA_CHECK(data.kind == kKind.at(s) || (s == "seq" && data.kind == "sft"),
             "train config: strategy '", s, "' trains on data.kind \"", kKind.at(s), "\", got \"",
             data.kind, "\"");
  if (s == "dpo") dpo.validate();
  if (s == "grpo") grpo.validate();
}

std::string TrainerConfig::effective_strategy() const {
  if (!strategy.empty()) return strategy;
  const std::string& k = data.kind;
  return k == "pair" ? "dpo" : k == "prompt" ? "grpo" : k;
}

ModelConfig resolve_model_config(const std::string& model) {
  VELA_CHECK(!model.empty(),
             "train config: no model (set \"model\" to a config.json or a preset, "
             "or \"init_from\" to a model directory)");
  if (fs::exists(model)) return ModelConfig::from_file(model);
  return ModelConfig::from_json(model_preset(model), "preset " + model);
}

}  // namespace vela
