// read_config_value: one train-config field into a typed value, with an InvalidArgument that names
// the key and the bad value (shared by TrainerConfig and the strategy configs).
#pragma once

#include <string>

#include "core/error.h"
#include "core/json.h"

namespace vela {

template <typename T>
void read_config_value(const json& value, const std::string& key, T& out) {
  try {
    out = value.get<T>();
  } catch (const json::exception& e) {
    VELA_THROW(InvalidArgument, "train config: bad value for '", key, "': ", value.dump(), " (",
               e.what(), ")");
  }
}

}  // namespace vela
