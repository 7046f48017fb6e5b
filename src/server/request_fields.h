// Typed access to request JSON for the API parsers: every wrong type or value becomes an
// ApiError 400 naming the field (the `param` of an OpenAI error), never a json exception.
#pragma once

#include <optional>
#include <string>

#include "core/json.h"
#include "engine/sampling_params.h"
#include "server/server_context.h"

namespace vela {

// Parses a request body that must be a JSON object.
json parse_json_body(const std::string& body);
// The value at key, or nullptr when absent or null.
const json* field(const json& obj, const char* key);
std::string string_field(const json& v, const std::string& param);
bool bool_field(const json& v, const std::string& param);
int32_t int_field(const json& v, const std::string& param);
// Checks "model" against the served model name (404 model_not_found for another name).
// Checks the body's "model" (absent, the served model's name, or a LoRA adapter's name: 404
// otherwise) and returns the LoRA adapter it names ("" = the base model).
std::string check_model(const ServerContext& ctx, const json& body);
// SamplingParams::from_json with its InvalidArgument turned into a 400.
SamplingParams sampling_from_json(const json& j);
// Random id with a prefix: "chatcmpl-...", "msg_...".
std::string random_id(const std::string& prefix, int n_chars = 24);
int64_t unix_time();

}  // namespace vela
