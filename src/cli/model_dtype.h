// The compute dtype of a served / generating model: `--dtype auto` (the default of serve, generate,
// chat and eval) keeps a bf16 or f16 checkpoint's dtype on a GPU (as vLLM's auto does; f32 would
// double the memory and halve the speed), keeps a bf16 checkpoint in bf16 on a CPU that multiplies
// bf16 natively (ops::cpu_bf16_native: AVX-512 BF16; the demo model serves 1.5x faster than in
// f32) and computes in f32 on other CPUs and for f16 / f32 checkpoints; f32 / bf16 / f16 are taken
// as given.
#pragma once

#include <string>

#include "core/device.h"
#include "core/dtype.h"

namespace vela::cli {

DType resolve_model_dtype(const std::string& arg, const std::string& model_dir, Device device);

}  // namespace vela::cli
