// Optimizer: the interface the trainer steps (AdamW and Muon implement it) and its configuration.
//
// An optimizer is built over a ParameterList and owns everything it keeps per parameter: an fp32
// master copy of the weights (aliasing the parameter's value when that already is a contiguous f32
// tensor, a separate f32 tensor for bf16/f16 compute weights), and its moments. step(lr) reads
// each parameter's f32 `grad` (already averaged over the accumulated micro-batches and clipped),
// updates the master weights and writes them back into the compute weights, so bf16 compute
// weights never accumulate rounding error across steps. Gradients are not zeroed here.
//
// State lives on the parameter's device and updates run there (ops/optim.h: fused element ops,
// OpenMP on the CPU, kernels on CUDA; the Newton-Schulz GEMMs use ops::gemm). On CUDA a step only
// launches work on the current stream and returns without waiting. State is saved to one
// safetensors file (device tensors are copied to the host for writing and uploaded on load):
// tensors keyed "<param name>.<slot>" and the scalars (kind, step count, the hyper-parameters) as
// JSON in the metadata; load_state() checks names, shapes and kind, and takes files written from
// either device (or before state moved to the device). Not thread-safe: one trainer thread drives
// it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/safetensors.h"
#include "train/parameter.h"

namespace vela {

struct OptimizerConfig {
  std::string kind = "adamw";  // adamw | muon
  // AdamW (also Muon's fallback for embeddings, norms and biases).
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;      // decoupled (AdamW): p -= lr * weight_decay * p
  bool decay_embeddings = false;  // kEmbedding params decayed too (kNorm / kBias never are)
  // Muon, for the kMatrix (2-D hidden) params.
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int muon_ns_steps = 5;
  // "moonlight": update RMS matched to AdamW's (0.2 * sqrt(max(rows, cols))), so one lr serves
  // both groups; "keller": sqrt(max(1, rows / cols)), the modded-nanogpt scale (use a much
  // larger muon_lr_mult, e.g. 0.02 / adamw lr).
  std::string muon_scale = "moonlight";
  double muon_lr_mult = 1.0;      // Muon params step with lr * muon_lr_mult
  double muon_weight_decay = -1;  // -1: the same as weight_decay
  // Precision of the Newton-Schulz iterations: "f32"; "bf16" (bf16 tensor-core GEMMs with fp32
  // accumulation, as modded-nanogpt does; CUDA only); "auto": bf16 for CUDA params whose compute
  // weights are bf16/f16, f32 otherwise (so CPU training is unchanged).
  std::string muon_ns_dtype = "auto";

  void validate() const;
  static OptimizerConfig from_json(const json& j);  // unknown keys are an error
  json to_json() const;
};

// Whether the parameter gets decoupled weight decay under `config`.
bool param_decays(const Parameter& p, const OptimizerConfig& config);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter with learning rate `lr` (the schedule's value for this step).
  virtual void step(double lr) = 0;
  virtual std::string kind() const = 0;
  int64_t step_count() const { return step_count_; }

  // Writes / reads the whole state (see the file comment). load_state() throws InvalidArgument on
  // a kind, name or shape mismatch and IoError on a bad file; the compute weights are refreshed
  // from the loaded master copies.
  void save_state(const std::string& path) const;
  void load_state(const std::string& path);

 protected:
  int64_t step_count_ = 0;
  // Appends this optimizer's tensors and scalars (a subclass extends its base's).
  virtual void collect_state(std::vector<std::pair<std::string, Tensor>>& tensors,
                             json& scalars) const = 0;
  virtual void restore_state(const SafetensorsReader& reader, const json& scalars) = 0;
};

// Builds the optimizer named by config.kind over `params` (which must outlive it).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, ParameterList& params);

}  // namespace vela
