// Weight I/O in the Hugging Face layout: `model.embed_tokens.weight`,
// `model.layers.{i}.self_attn.{q,k,v,o}_proj.{weight,bias}`, `...q_norm/k_norm.weight`,
// `...{input,post_attention}_layernorm.weight`, `...mlp.{gate,up,down}_proj.weight`,
// `model.norm.weight`, `lm_head.weight` (absent when tied). Loading fuses q/k/v and gate/up into
// single weights and converts to the compute dtype; saving splits them back, so transformers
// loads what vela writes.
#pragma once

#include <string>

#include "core/safetensors.h"
#include "model/transformer.h"

namespace vela {

// Fills model.embed/blocks/final_norm/lm_head from `reader`, converting to dtype on device.
// A missing, unexpected or mis-shaped tensor is an InvalidArgument naming it.
void load_weights(Transformer& model, const SafetensorsReader& reader, DType dtype, Device device);

// Writes `<dir>/config.json` and `<dir>/model.safetensors` (dtype of the model's weights).
void save_model(const Transformer& model, const std::string& dir);

}  // namespace vela
