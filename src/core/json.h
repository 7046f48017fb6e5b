// JSON for the whole code base: nlohmann::json (ordered, so written files keep their key order).
#pragma once

#include <nlohmann/json.hpp>

namespace vela {
using json = nlohmann::ordered_json;
}  // namespace vela
