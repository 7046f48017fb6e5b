// LoRA adapters on a Transformer in Hugging Face PEFT's layout: a directory with
// adapter_config.json ({"peft_type": "LORA", "r", "lora_alpha", "lora_dropout", "target_modules",
// ...}) and adapter_model.safetensors holding, per adapted module,
//   base_model.model.model.layers.<i>.<self_attn|mlp>.<module>.lora_A.weight  [r, in]
//   base_model.model.model.layers.<i>.<self_attn|mlp>.<module>.lora_B.weight  [out, r]
// Target modules are the HF projection names q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
// down_proj ("all-linear" = all of them); vela's fused qkv / gate_up carry one LoRA segment per
// module (nn/lora.h). PEFT options vela does not implement (DoRA, bias != "none", fan_in_fan_out,
// rank/alpha patterns, layers_to_transform, modules_to_save, embedding LoRA) are an Unsupported
// error naming the field, never ignored.
//
// Three uses: training (attach_lora_for_training: one fresh adapter, A ~ kaiming-uniform, B = 0 as
// PEFT initializes it), serving (attach_lora_adapters: several adapters stacked in slots, chosen
// per row), and merging (merge_lora_adapter: W += scale B A, then save_model writes a plain HF
// model).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "model/transformer.h"
#include "nn/lora.h"

namespace vela {

struct LoraConfig {
  int64_t r = 8;
  double alpha = 8;  // lora_alpha; the update is scaled by alpha / r (alpha / sqrt(r) with rsLoRA)
  double dropout = 0;  // lora_dropout on the adapter input, training only
  std::vector<std::string> target_modules = {"q_proj", "v_proj"};  // PEFT's Llama default
  bool use_rslora = false;

  float scale() const;
  void validate() const;
  // The train config's "lora" object: {"r", "alpha", "dropout", "target_modules", "use_rslora"}
  // (target_modules a list or "all-linear"); unknown keys are an error.
  static LoraConfig from_train_json(const json& j);
  json to_train_json() const;
  // adapter_config.json (PEFT) and back.
  json to_peft_json(const std::string& base_model) const;
  static LoraConfig from_peft_json(const json& j, const std::string& source);
};

// The adapter set a serving model holds (Transformer::lora_adapters): names by slot and the
// per-row slot buffer every LoraLinear of the model reads.
struct LoraAdapterSet {
  std::vector<std::string> names;  // slot -> adapter name
  std::vector<std::string> dirs;   // slot -> directory it was loaded from
  std::shared_ptr<LoraRowSlots> rows;
  // The slot of `name`, or -1.
  int32_t slot(const std::string& name) const;
  // Makes the row buffers hold at least n rows on `device` (slots -1 = base).
  void reserve_rows(int64_t n, Device device);
};

// One trainable adapter tensor as TrainableModel registers it.
struct LoraParam {
  std::string name;  // the PEFT tensor name
  Tensor value;      // [r, in] or [out, r] in the model's dtype, aliasing the LoraLinear's slot 0
  Tensor grad;       // f32, same shape
};

// Attaches a fresh adapter (A kaiming-uniform with bound 1 / sqrt(in), B = 0; seeded) to every
// target module of every layer and returns its parameters in a fixed order (layer, then module
// in q, k, v, o, gate, up, down order; A before B). Throws if the model already has adapters.
std::vector<LoraParam> attach_lora_for_training(Transformer& model, const LoraConfig& config,
                                                uint64_t seed);

// Writes `dir`/adapter_config.json and adapter_model.safetensors of the model's single (slot 0)
// adapter. `base_model` goes into base_model_name_or_path.
void save_lora_adapter(const Transformer& model, const LoraConfig& config, const std::string& dir,
                       const std::string& base_model);
// The file writer behind save_lora_adapter, for a checkpoint's staging directory.
void write_lora_files(const Transformer& model, const LoraConfig& config, const std::string& dir,
                      const std::string& base_model);
// Copies a saved adapter's tensors into the model's training adapter (resume). Its config must be
// `config` (r, targets) and its tensors those the model's adapter has.
void load_lora_into(Transformer& model, const LoraConfig& config, const std::string& dir);

// A PEFT adapter read from disk and checked against `model_config`: per module path
// ("model.layers.3.self_attn.q_proj") its A [r, in] and B [out, r] (CPU, file dtype).
struct LoraAdapterWeights {
  LoraConfig config;
  std::map<std::string, std::pair<Tensor, Tensor>> modules;
};
LoraAdapterWeights read_lora_adapter(const std::string& dir, const ModelConfig& model_config);

// Loads adapters (name, dir) into stacked per-row slots on every projection any of them targets
// and sets model.lora_adapters; requests pick one by name through the row slots. Names must be
// unique and non-empty.
void attach_lora_adapters(Transformer& model,
                          const std::vector<std::pair<std::string, std::string>>& adapters);
// Parses "name=dir" (or a bare dir, named after its last path component).
std::pair<std::string, std::string> parse_lora_arg(const std::string& arg);

// W += scale * B @ A for every module of the adapter in `dir` (the model must have no LoRA hooks).
void merge_lora_adapter(Transformer& model, const std::string& dir);

// A shallow copy of `model` (shared weights) without any LoRA hooks: the frozen base.
Transformer without_lora(const Transformer& model);
// Whether any projection of the model has a LoRA hook.
bool has_lora(const Transformer& model);
// Scratch bytes the model's LoRA temporaries need at most in one forward of n_rows rows.
int64_t model_lora_scratch_bytes(const Transformer& model, int64_t n_rows);

}  // namespace vela
