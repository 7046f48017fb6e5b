// Checkpoints: crash-safe publication of a training checkpoint directory, and its contents.
//
// Layout: <out_dir>/step-<8 digits>/ holding
//   config.json, model.safetensors   the model in the Hugging Face layout (model/weights.h), so
//                                    transformers and `vela serve` load the directory directly
//   optimizer.safetensors            optimizer state (train/optim/optimizer.h)
//   trainer_state.json               step, schedule, data position, RNG, anything the trainer adds
//   (any extra files, e.g. the tokenizer's, copied by the trainer)
//   manifest.json                    {"format_version": 1, "step": N, "files": {name: {"sha256",
//                                    "bytes"}}} for every other file
//
// Publication (publish_checkpoint): the payload is written into a hidden sibling staging
// directory `.step-N.staging-<pid>`, every file is fsync'd and checksummed, the manifest written
// and fsync'd, the staging directory fsync'd, then renamed onto `step-N` (atomic on POSIX) and the
// parent fsync'd. If `step-N` already exists (a re-run into the same output directory), it is first
// renamed to a hidden `.step-N.retired-<pid>-<n>`, the new one published, the retired one removed.
// So a process killed at any moment leaves every previously published checkpoint intact; the only
// debris is hidden, and recover_checkpoints() cleans it up (restoring a retired checkpoint whose
// replacement never got published). Names starting with '.' are never listed as checkpoints.
//
// Loading: a manifest is optional (older checkpoints still load); with verify the listed files'
// sizes and sha256 are checked and a mismatch is an IoError naming the file.
//
// Test hook: VELA_CHECKPOINT_ABORT_AT=<k>[:kill] ends the process (_exit(86), or SIGKILL) at the
// k-th publication event (1-based: each payload file fsync'd, manifest written, staging fsync'd,
// old step retired, new step renamed into place, retired removed), to test crash safety.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"
#include "model/transformer.h"
#include "train/optim/optimizer.h"

namespace vela {

inline constexpr int kCheckpointFormatVersion = 1;

struct ManifestEntry {
  std::string sha256;  // 64 lowercase hex characters
  uint64_t bytes = 0;
};

struct CheckpointManifest {
  int format_version = kCheckpointFormatVersion;
  int64_t step = 0;
  std::map<std::string, ManifestEntry> files;  // relative file name -> checksum

  json to_json() const;
  static CheckpointManifest from_json(const json& j, const std::string& source);
};

// "step-00000100".
std::string checkpoint_name(int64_t step);

// Publishes `<out_dir>/<checkpoint_name(step)>` (creating out_dir if needed). `write_files` gets
// the staging directory and writes the payload into it (flat: no subdirectories). Returns the
// published path. An exception from write_files removes the staging directory and propagates.
std::string publish_checkpoint(
    const std::string& out_dir, int64_t step,
    const std::function<void(const std::string& staging_dir)>& write_files);

// Reads `<dir>/manifest.json`; returns false when there is none (a legacy checkpoint).
bool read_manifest(const std::string& dir, CheckpointManifest* out);
// Checks every manifest entry's size and sha256 (IoError naming the first bad file). Returns false
// (and checks nothing) when the directory has no manifest.
bool verify_checkpoint(const std::string& dir);

// Published checkpoints in out_dir as (step, path), ascending by step; empty when out_dir is
// absent.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& out_dir);
// The path of the highest published step, or "" when there is none.
std::string latest_checkpoint(const std::string& out_dir);
// Removes all but the newest `keep` published checkpoints (each renamed to a hidden name first, so
// a checkpoint is never visible half-deleted). keep <= 0 keeps everything.
void prune_checkpoints(const std::string& out_dir, int64_t keep);
// Removes staging directories of processes that no longer run, and either removes a retired
// checkpoint (its step was re-published) or renames it back (the re-publication never finished).
void recover_checkpoints(const std::string& out_dir);

// ---- training checkpoint contents ----

struct CheckpointPayload {
  const Transformer* model = nullptr;  // required (unless write_model is given)
  // Writes the model part instead of save_model (a LoRA run: adapter_config.json +
  // adapter_model.safetensors, the PEFT layout) into the staging directory.
  std::function<void(const std::string& staging_dir)> write_model;
  const Optimizer* optimizer = nullptr;  // optional
  // The optimizer's file name (a ZeRO-1 job writes one shard per rank, see write_more).
  std::string optimizer_file = "optimizer.safetensors";
  // Called last in the staging directory, before checksums (a data-parallel job's other ranks add
  // their optimizer shards there and rank 0 writes the shard index).
  std::function<void(const std::string& staging_dir)> write_more;
  json trainer_state = json::object();   // written as trainer_state.json (must hold "step")
  std::vector<std::string> extra_files;  // copied in by file name (e.g. tokenizer.json)
};

// Publishes a training checkpoint for trainer_state["step"]; returns its path.
std::string save_training_checkpoint(const std::string& out_dir, const CheckpointPayload& payload);

// Loads the model weights (in the model's current dtype and device; load_weights replaces the
// model's tensors, so build a TrainableModel / optimizer over the model AFTER this) and returns
// trainer_state.json (an empty object when absent). With `verify` the manifest's checksums are
// checked first. The model must have the checkpoint's architecture.
json load_training_checkpoint(const std::string& dir, Transformer& model, bool verify);
// Loads `<dir>/optimizer.safetensors`, or the shards `<dir>/optimizer.safetensors.index.json`
// names (a ZeRO-1 checkpoint), into `optimizer`, which takes the tensors of its own parameters:
// so a job of any world size resumes from a checkpoint of any other (IoError when neither file is
// there: a model-only directory cannot resume training, only start one through init_from).
void load_optimizer_state(const std::string& dir, Optimizer& optimizer);
// ZeRO-1 optimizer shards: "optimizer-<rank 5 digits>-of-<world 5 digits>.safetensors", and the
// index over the shards of `staging_dir` (a safetensors index: weight_map tensor -> file).
std::string optimizer_shard_name(int rank, int world_size);
void write_optimizer_shard_index(const std::string& staging_dir, int world_size);
// Reads `<dir>/trainer_state.json` (an empty object when absent).
json read_trainer_state(const std::string& dir);

}  // namespace vela
