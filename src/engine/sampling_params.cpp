// SamplingParams validation and the OpenAI-request JSON mapping. Every error names the field and
// what was expected, since these messages go back to API clients as 400s.
#include "engine/sampling_params.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace vela {

void SamplingParams::validate() const {
  VELA_CHECK(std::isfinite(temperature) && temperature >= 0.0f,
             "temperature must be a finite number >= 0 (0 = greedy), got ", temperature);
  VELA_CHECK(top_p > 0.0f && top_p <= 1.0f, "top_p must be in (0, 1], got ", top_p);
  VELA_CHECK(top_k >= -1, "top_k must be -1 or 0 (off) or a positive count, got ", top_k);
  VELA_CHECK(min_p >= 0.0f && min_p <= 1.0f, "min_p must be in [0, 1], got ", min_p);
  VELA_CHECK(presence_penalty >= -2.0f && presence_penalty <= 2.0f,
             "presence_penalty must be in [-2, 2], got ", presence_penalty);
  VELA_CHECK(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f,
             "frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  VELA_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f,
             "repetition_penalty must be a finite number > 0 (1 = off), got ", repetition_penalty);
  for (const auto& [id, bias] : logit_bias) {
    VELA_CHECK(id >= 0, "logit_bias: token id must be >= 0, got ", id);
    // -inf bans a token; +inf or NaN would turn the softmax into NaN.
    VELA_CHECK(!std::isnan(bias) && bias != std::numeric_limits<float>::infinity(),
               "logit_bias: the bias of token ", id, " must be a finite number or -inf, got ",
               bias);
  }
  VELA_CHECK(max_tokens >= 0, "max_tokens must be >= 0, got ", max_tokens);
  VELA_CHECK(n >= 1, "n must be >= 1, got ", n);
  for (const std::string& s : stop) VELA_CHECK(!s.empty(), "stop: stop strings must be non-empty");
  for (int32_t id : stop_token_ids)
    VELA_CHECK(id >= 0, "stop_token_ids: token ids must be >= 0, got ", id);
  VELA_CHECK(top_logprobs >= 0 && top_logprobs <= kMaxTopLogprobs, "top_logprobs must be in [0, ",
             kMaxTopLogprobs, "], got ", top_logprobs);
  VELA_CHECK(top_logprobs == 0 || logprobs, "top_logprobs requires logprobs to be true");
}

void SamplingParams::validate_token_ids(int64_t vocab_size) const {
  for (const auto& [id, bias] : logit_bias)
    VELA_CHECK(id >= 0 && id < vocab_size, "logit_bias: token id ", id,
               " is outside the vocabulary [0, ", vocab_size, ")");
  for (int32_t id : stop_token_ids)
    VELA_CHECK(id >= 0 && id < vocab_size, "stop_token_ids: token id ", id,
               " is outside the vocabulary [0, ", vocab_size, ")");
}

namespace {

// A present, non-null value for `key`, or nullptr.
const json* find(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

float get_number(const json& v, const char* key) {
  VELA_CHECK(v.is_number(), key, " must be a number, got ", v.dump());
  return v.get<float>();
}

int32_t to_int32(const json& v, const char* key) {
  VELA_CHECK(v.is_number_integer(), key, " must be an integer, got ", v.dump());
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    VELA_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()), key,
               " is too large: ", u);
    return static_cast<int32_t>(u);
  }
  int64_t i = v.get<int64_t>();
  VELA_CHECK(i >= std::numeric_limits<int32_t>::min() && i <= std::numeric_limits<int32_t>::max(),
             key, " is out of the int32 range: ", i);
  return static_cast<int32_t>(i);
}

bool get_bool(const json& v, const char* key) {
  VELA_CHECK(v.is_boolean(), key, " must be true or false, got ", v.dump());
  return v.get<bool>();
}

std::vector<int32_t> get_int_list(const json& v, const char* key) {
  VELA_CHECK(v.is_array(), key, " must be a list of integers, got ", v.dump());
  std::vector<int32_t> out;
  out.reserve(v.size());
  for (const json& e : v) out.push_back(to_int32(e, key));
  return out;
}

}  // namespace

SamplingParams SamplingParams::from_json(const json& j) {
  VELA_CHECK(j.is_object(), "sampling parameters must be a JSON object, got ", j.dump());
  SamplingParams p;
  if (const json* v = find(j, "temperature")) p.temperature = get_number(*v, "temperature");
  if (const json* v = find(j, "top_p")) p.top_p = get_number(*v, "top_p");
  if (const json* v = find(j, "top_k")) p.top_k = to_int32(*v, "top_k");
  if (const json* v = find(j, "min_p")) p.min_p = get_number(*v, "min_p");
  if (const json* v = find(j, "presence_penalty"))
    p.presence_penalty = get_number(*v, "presence_penalty");
  if (const json* v = find(j, "frequency_penalty"))
    p.frequency_penalty = get_number(*v, "frequency_penalty");
  if (const json* v = find(j, "repetition_penalty"))
    p.repetition_penalty = get_number(*v, "repetition_penalty");
  if (const json* v = find(j, "logit_bias")) {
    VELA_CHECK(v->is_object(), "logit_bias must be an object {\"token id\": bias}, got ",
               v->dump());
    for (const auto& [key, bias] : v->items()) {
      int32_t id = 0;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      VELA_CHECK(ec == std::errc() && end == key.data() + key.size() && !key.empty(),
                 "logit_bias keys must be token ids (decimal integers), got \"", key, "\"");
      VELA_CHECK(bias.is_number(), "logit_bias: the bias of token ", key, " must be a number, got ",
                 bias.dump());
      p.logit_bias.emplace_back(id, bias.get<float>());
    }
  }
  if (const json* v = find(j, "seed")) {
    VELA_CHECK(v->is_number_integer(), "seed must be an integer, got ", v->dump());
    // Negative seeds (allowed by OpenAI's int64 field) map to their two's-complement bits.
    p.seed =
        v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const json* v = find(j, "max_tokens")) p.max_tokens = to_int32(*v, "max_tokens");
  if (const json* v = find(j, "max_completion_tokens"))
    p.max_tokens = to_int32(*v, "max_completion_tokens");
  if (const json* v = find(j, "n")) p.n = to_int32(*v, "n");
  if (const json* v = find(j, "stop")) {
    if (v->is_string()) {
      p.stop.push_back(v->get<std::string>());
    } else {
      VELA_CHECK(v->is_array(), "stop must be a string or a list of strings, got ", v->dump());
      for (const json& s : *v) {
        VELA_CHECK(s.is_string(), "stop must be a string or a list of strings, got ", v->dump());
        p.stop.push_back(s.get<std::string>());
      }
    }
  }
  if (const json* v = find(j, "stop_token_ids"))
    p.stop_token_ids = get_int_list(*v, "stop_token_ids");
  if (const json* v = find(j, "ignore_eos")) p.ignore_eos = get_bool(*v, "ignore_eos");
  if (const json* v = find(j, "logprobs")) {
    if (v->is_boolean()) {
      p.logprobs = v->get<bool>();
    } else {
      // Completions-style: "logprobs": k asks for the sampled token's logprob and the top k.
      VELA_CHECK(v->is_number_integer(), "logprobs must be true/false or an integer in [0, ",
                 kMaxTopLogprobs, "], got ", v->dump());
      p.top_logprobs = to_int32(*v, "logprobs");
      VELA_CHECK(p.top_logprobs >= 0 && p.top_logprobs <= kMaxTopLogprobs,
                 "logprobs must be true/false or an integer in [0, ", kMaxTopLogprobs, "], got ",
                 p.top_logprobs);
      p.logprobs = true;
    }
  }
  if (const json* v = find(j, "top_logprobs")) p.top_logprobs = to_int32(*v, "top_logprobs");
  if (const json* v = find(j, "on_weight_update")) {
    std::string s = v->is_string() ? v->get<std::string>() : v->dump();
    if (s == "mixed")
      p.on_weight_update = WeightUpdatePolicy::kMixed;
    else if (s == "restart")
      p.on_weight_update = WeightUpdatePolicy::kRestart;
    else if (s == "finish")
      p.on_weight_update = WeightUpdatePolicy::kFinishOld;
    else
      VELA_THROW(InvalidArgument,
                 "on_weight_update must be \"mixed\", \"restart\" or \"finish\", got ", s);
  }
  // Constraints: at most one of the keys.
  const char* constraint_key = nullptr;
  auto set_constraint = [&](const char* key, Constraint c) {
    VELA_CHECK(constraint_key == nullptr,
               "only one of response_format, guided_json, guided_regex, "
               "guided_grammar and guided_choice may be given (got ",
               constraint_key, " and ", key, ")");
    constraint_key = key;
    p.constraint = std::move(c);
  };
  if (const json* v = find(j, "response_format")) {
    VELA_CHECK(v->is_object(), "response_format must be an object, got ", v->dump());
    const json* type = find(*v, "type");
    VELA_CHECK(type != nullptr && type->is_string(),
               "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
    const std::string t = type->get<std::string>();
    if (t == "json_object") {
      set_constraint("response_format", Constraint::json_object());
    } else if (t == "json_schema") {
      const json* js = find(*v, "json_schema");
      VELA_CHECK(js != nullptr && js->is_object(),
                 "response_format.json_schema must be an object with a \"schema\"");
      const json* schema = find(*js, "schema");
      VELA_CHECK(schema != nullptr && (schema->is_object() || schema->is_boolean()),
                 "response_format.json_schema.schema must be a JSON Schema object");
      set_constraint("response_format", Constraint::json_schema(*schema));
    } else {
      VELA_CHECK(t == "text",
                 "response_format.type must be \"text\", \"json_object\" or "
                 "\"json_schema\", got \"",
                 t, "\"");
    }
  }
  if (const json* v = find(j, "guided_json")) {
    if (v->is_string()) {
      json schema;
      try {
        schema = json::parse(v->get<std::string>());
      } catch (const std::exception&) {
        VELA_THROW(InvalidArgument, "guided_json is a string but not valid JSON");
      }
      set_constraint("guided_json", Constraint::json_schema(schema));
    } else {
      VELA_CHECK(v->is_object(), "guided_json must be a JSON Schema object, got ", v->dump());
      set_constraint("guided_json", Constraint::json_schema(*v));
    }
  }
  if (const json* v = find(j, "guided_regex")) {
    VELA_CHECK(v->is_string(), "guided_regex must be a string, got ", v->dump());
    set_constraint("guided_regex", Constraint::regex(v->get<std::string>()));
  }
  if (const json* v = find(j, "guided_grammar")) {
    VELA_CHECK(v->is_string(), "guided_grammar must be a string (GBNF), got ", v->dump());
    set_constraint("guided_grammar", Constraint::grammar(v->get<std::string>()));
  }
  if (const json* v = find(j, "guided_choice")) {
    VELA_CHECK(v->is_array() && !v->empty(),
               "guided_choice must be a non-empty list of strings, got ", v->dump());
    for (const json& c : *v)
      VELA_CHECK(c.is_string(), "guided_choice must be a list of strings, got ", v->dump());
    set_constraint("guided_choice", Constraint::choice(*v));
  }
  if (const json* v = find(j, "logprobs_mode")) {
    std::string s = v->is_string() ? v->get<std::string>() : v->dump();
    if (s == "raw")
      p.logprobs_mode = LogprobsMode::kRaw;
    else if (s == "tempered")
      p.logprobs_mode = LogprobsMode::kTempered;
    else
      VELA_THROW(InvalidArgument, "logprobs_mode must be \"raw\" or \"tempered\", got ", s);
  }
  if (const json* v = find(j, "speculative")) p.speculative = get_bool(*v, "speculative");
  p.validate();
  return p;
}

json SamplingParams::to_json() const {
  json j;
  j["temperature"] = temperature;
  j["top_p"] = top_p;
  j["top_k"] = top_k;
  j["min_p"] = min_p;
  j["presence_penalty"] = presence_penalty;
  j["frequency_penalty"] = frequency_penalty;
  j["repetition_penalty"] = repetition_penalty;
  json bias = json::object();
  for (const auto& [id, b] : logit_bias) bias[std::to_string(id)] = b;
  j["logit_bias"] = std::move(bias);
  j["seed"] = seed ? json(*seed) : json(nullptr);
  j["max_tokens"] = max_tokens;
  j["n"] = n;
  j["stop"] = stop;
  j["stop_token_ids"] = stop_token_ids;
  j["ignore_eos"] = ignore_eos;
  j["logprobs"] = logprobs;
  j["top_logprobs"] = top_logprobs;
  j["on_weight_update"] =
      on_weight_update ? json(weight_update_policy_name(*on_weight_update)) : json(nullptr);
  switch (constraint.kind) {
    case Constraint::Kind::kNone:
      break;
    case Constraint::Kind::kJsonSchema:
      j["guided_json"] = json::parse(constraint.text);
      break;
    case Constraint::Kind::kJsonObject:
      j["response_format"] = {{"type", "json_object"}};
      break;
    case Constraint::Kind::kRegex:
      j["guided_regex"] = constraint.text;
      break;
    case Constraint::Kind::kGrammar:
      j["guided_grammar"] = constraint.text;
      break;
    case Constraint::Kind::kChoice:
      j["guided_choice"] = json::parse(constraint.text);
      break;
    case Constraint::Kind::kToolCalls:
      j["tool_calls_constraint"] = json::parse(constraint.text);
      break;
  }
  j["logprobs_mode"] = logprobs_mode_name(logprobs_mode);
  j["speculative"] = speculative;
  return j;
}

const char* logprobs_mode_name(LogprobsMode m) {
  return m == LogprobsMode::kTempered ? "tempered" : "raw";
}

const char* weight_update_policy_name(WeightUpdatePolicy p) {
  switch (p) {
    case WeightUpdatePolicy::kMixed:
      return "mixed";
    case WeightUpdatePolicy::kRestart:
      return "restart";
    case WeightUpdatePolicy::kFinishOld:
      return "finish";
  }
  return "?";
}

}  // namespace vela
