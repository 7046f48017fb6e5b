// Built-in model configurations by name (HF config.json dialect): "tiny" for tests and smoke
// runs, "100m" (GPT-2-small sized), "bench-1b" (../shared/TARGETS.md). Used by `vela train`,
// `vela bench model` and `vela bench engine`.
#pragma once

#include <string>

#include "core/json.h"

namespace vela {

// The config.json of preset `name`; InvalidArgument naming the presets for an unknown name.
json model_preset(const std::string& name);

}  // namespace vela
