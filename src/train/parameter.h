// Parameter: one trainable tensor as the optimizer, the gradient clipper and the checkpoint see it.
// `value` aliases the model's own weight tensor (Tensor copies share storage), so an optimizer
// step writes straight into the model; `grad` is an f32 tensor of the same shape, on the same
// device, that backward passes accumulate into (`+=`). Optimizer state sits on that device too. The kind drives weight-decay and Muon/AdamW grouping.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace vela {

enum class ParamKind {
  kMatrix,     // 2-D hidden projection (q/k/v/o, gate/up/down): decayed; Muon-eligible
  kEmbedding,  // token embedding and an untied LM head: AdamW; decay as configured
  kNorm,       // RMSNorm weights (incl. QK-norm): no decay
  kBias,       // q/k/v biases: no decay
};

struct Parameter {
  // HF-style name; fused weights keep vela's fused names ("model.layers.0.self_attn.qkv_proj.weight",
  // "model.layers.0.mlp.gate_up_proj.weight"). Model checkpoints go through model/weights.h (HF
  // layout, split); optimizer state is keyed by these names.
  std::string name;
  Tensor value;      // the model's compute weights (f32 on CPU, bf16/f32 on CUDA)
  Tensor grad;       // f32, same shape as value
  ParamKind kind = ParamKind::kMatrix;
};

using ParameterList = std::vector<Parameter>;

}  // namespace vela
