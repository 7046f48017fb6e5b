// resolve_model_dtype: `auto` reads the checkpoint's config.json (torch_dtype / dtype).
#include "cli/model_dtype.h"

#include <filesystem>

#include "model/model_config.h"
#include "ops/gemm.h"

namespace vela::cli {

DType resolve_model_dtype(const std::string& arg, const std::string& model_dir, Device device) {
  if (arg != "auto") return parse_dtype(arg);
  if (model_dir.empty()) return DType::kF32;
  const std::filesystem::path config = std::filesystem::path(model_dir) / "config.json";
  // A missing or broken config is reported by the model load that follows, with its own message.
  if (!std::filesystem::exists(config)) return DType::kF32;
  const DType stored = ModelConfig::from_file(config.string()).dtype;
  if (device.is_cuda())
    return stored == DType::kBF16 || stored == DType::kF16 ? stored : DType::kF32;
  return stored == DType::kBF16 && ops::cpu_bf16_native() ? DType::kBF16 : DType::kF32;
}

}  // namespace vela::cli
