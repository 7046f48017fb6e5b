// Request field helpers.
#include "server/request_fields.h"

#include <algorithm>
#include <ctime>
#include <limits>
#include <random>

#include "server/api_error.h"

namespace vela {

namespace {

// Deepest [ / { nesting outside strings. Parsing and printing JSON recurse, so a body nested
// thousands deep must be refused before it reaches them (it would overflow a thread's stack).
size_t nesting_depth(const std::string& s, size_t limit) {
  size_t depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{')
      max_depth = std::max(max_depth, ++depth);
    else if ((c == ']' || c == '}') && depth > 0)
      --depth;
    if (max_depth > limit) break;
  }
  return max_depth;
}

constexpr size_t kMaxNesting = 64;

// A value for an error message: compact and at most ~120 bytes.
std::string short_dump(const json& v) {
  std::string s = dump_json(v);
  return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

}  // namespace

json parse_json_body(const std::string& body) {
  if (nesting_depth(body, kMaxNesting) > kMaxNesting)
    throw ApiError(400, "the request body is nested more than " + std::to_string(kMaxNesting) +
                            " levels deep");
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw ApiError(
        400, "the request body is not valid JSON (" + std::to_string(body.size()) + " bytes)");
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string string_field(const json& v, const std::string& param) {
  if (!v.is_string()) throw ApiError(400, param + " must be a string, got " + short_dump(v), param);
  return v.get<std::string>();
}

bool bool_field(const json& v, const std::string& param) {
  if (!v.is_boolean())
    throw ApiError(400, param + " must be true or false, got " + short_dump(v), param);
  return v.get<bool>();
}

int32_t int_field(const json& v, const std::string& param) {
  bool ok = v.is_number_integer();
  if (ok && v.is_number_unsigned())
    ok = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max());
  else if (ok)
    ok = v.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
         v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
  if (!ok) throw ApiError(400, param + " must be a 32-bit integer, got " + short_dump(v), param);
  return static_cast<int32_t>(v.get<int64_t>());
}

std::string check_model(const ServerContext& ctx, const json& body) {
  const json* m = field(body, "model");
  if (m == nullptr) return "";
  std::string name = string_field(*m, "model");
  if (name == ctx.cfg.model_name) return "";
  const std::vector<std::string>& adapters = ctx.engine.lora_names();
  if (std::find(adapters.begin(), adapters.end(), name) != adapters.end()) return name;
  std::string served = "`" + ctx.cfg.model_name + "`";
  for (const std::string& a : adapters) served += ", `" + a + "`";
  throw ApiError(404,
                 "The model `" + name + "` does not exist (this server serves " + served + ").",
                 "model", "model_not_found");
}

SamplingParams sampling_from_json(const json& j) {
  try {
    return SamplingParams::from_json(j);
  } catch (const InvalidArgument& e) {
    throw ApiError(400, clean_error_message(e.what()));
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("invalid sampling parameter: ") + e.what());
  }
}

std::string random_id(const std::string& prefix, int n_chars) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = prefix;
  for (int i = 0; i < n_chars; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

int64_t unix_time() { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace vela
