// PreprocessConfig parsing: strict JSON (unknown keys, wrong types and bad values are errors).
#include "train/data/preprocess_config.h"

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace vela {
namespace {

void check_keys(const json& j, const std::string& where, const std::set<std::string>& allowed) {
  VELA_CHECK(j.is_object(), where, " must be a JSON object, got ", j.type_name());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (allowed.count(it.key())) continue;
    std::string list;
    for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
    VELA_THROW(InvalidArgument, "unknown key '", it.key(), "' in ", where,
               " (expected one of: ", list, ")");
  }
}

std::string get_string(const json& j, const char* key, const std::string& where,
                       const std::string& fallback = "") {
  if (!j.contains(key)) return fallback;
  VELA_CHECK(j[key].is_string(), where, ".", key, " must be a string, got ", j[key].type_name());
  return j[key].get<std::string>();
}

bool get_bool(const json& j, const char* key, const std::string& where, bool fallback) {
  if (!j.contains(key)) return fallback;
  VELA_CHECK(j[key].is_boolean(), where, ".", key, " must be true or false, got ",
             j[key].type_name());
  return j[key].get<bool>();
}

int64_t get_int(const json& j, const char* key, const std::string& where, int64_t fallback,
                int64_t min_value) {
  if (!j.contains(key)) return fallback;
  VELA_CHECK(j[key].is_number_integer(), where, ".", key, " must be an integer, got ",
             j[key].type_name());
  int64_t v = j[key].get<int64_t>();
  VELA_CHECK(v >= min_value, where, ".", key, " must be >= ", min_value, ", got ", v);
  return v;
}

Truncation parse_truncation(const std::string& s) {
  if (s == "drop") return Truncation::kDrop;
  if (s == "truncate_left") return Truncation::kTruncateLeft;
  if (s == "truncate_right") return Truncation::kTruncateRight;
  if (s == "split") return Truncation::kSplit;
  VELA_THROW(InvalidArgument, "config.truncation must be drop, truncate_left, truncate_right or ",
             "split, got '", s, "'");
}

}  // namespace

const char* truncation_name(Truncation t) {
  switch (t) {
    case Truncation::kDrop:
      return "drop";
    case Truncation::kTruncateLeft:
      return "truncate_left";
    case Truncation::kTruncateRight:
      return "truncate_right";
    case Truncation::kSplit:
      return "split";
  }
  return "?";
}

const char* format_name(RecordFormat f) {
  switch (f) {
    case RecordFormat::kText: return "text";
    case RecordFormat::kChat: return "chat";
    case RecordFormat::kPreference: return "preference";
    case RecordFormat::kPrompt: return "prompt";
  }
  return "?";
}

PreprocessConfig PreprocessConfig::from_json(const json& j) {
  const std::string w = "config";
  check_keys(j, w,
             {"tokenizer", "format", "sections", "chat", "add_bos", "add_eos", "bos_token",
              "eos_token", "max_length", "truncation", "packing", "packing_window", "seq_len",
              "shard_tokens", "threads"});
  PreprocessConfig c;
  c.tokenizer = get_string(j, "tokenizer", w);
  VELA_CHECK(!c.tokenizer.empty(),
             "config.tokenizer is required (a directory with tokenizer.json)");
  std::string format = get_string(j, "format", w, "text");
  if (format == "text") {
    c.format = RecordFormat::kText;
  } else if (format == "chat") {
    c.format = RecordFormat::kChat;
  } else if (format == "preference") {
    c.format = RecordFormat::kPreference;
  } else if (format == "prompt") {
    c.format = RecordFormat::kPrompt;
  } else {
    VELA_THROW(InvalidArgument,
               "config.format must be \"text\", \"chat\", \"preference\" or \"prompt\", got '",
               format, "'");
  }
  const bool rl = c.format == RecordFormat::kPreference || c.format == RecordFormat::kPrompt;

  if (j.contains("sections")) {
    VELA_CHECK(c.format == RecordFormat::kText, "config.sections applies to format \"text\" only");
    VELA_CHECK(j["sections"].is_array() && !j["sections"].empty(),
               "config.sections must be a non-empty array of {\"field\", \"train\", ...}");
    for (size_t i = 0; i < j["sections"].size(); ++i) {
      const json& s = j["sections"][i];
      std::string sw = "config.sections[" + std::to_string(i) + "]";
      check_keys(s, sw, {"field", "train", "optional", "prefix", "suffix"});
      TextSection sec;
      sec.field = get_string(s, "field", sw);
      VELA_CHECK(!sec.field.empty(), sw, ".field is required");
      sec.train = get_bool(s, "train", sw, true);
      sec.optional = get_bool(s, "optional", sw, false);
      sec.prefix = get_string(s, "prefix", sw);
      sec.suffix = get_string(s, "suffix", sw);
      c.sections.push_back(std::move(sec));
    }
  } else if (c.format == RecordFormat::kText) {
    c.sections.push_back(TextSection{"text", true, false, "", ""});
  }
  if (c.format == RecordFormat::kText) {
    bool any_trained = false;
    for (const auto& s : c.sections) any_trained |= s.train;
    VELA_CHECK(any_trained, "config.sections: at least one section must have \"train\": true");
  }

  if (rl) {
    c.chat.messages_field = "messages";
    c.chat.instruction_field = "instruction";
    c.chat.input_field = "input";
  }
  if (j.contains("chat") && rl) {
    const json& ch = j["chat"];
    std::string cw = "config.chat";
    check_keys(ch, cw,
               {"messages_field", "prompt_field", "instruction_field", "input_field",
                "chosen_field", "rejected_field", "answer_field", "template_vars"});
    auto field = [&](const char* k, std::string& out) {
      if (ch.contains(k)) out = get_string(ch, k, cw);
    };
    field("messages_field", c.chat.messages_field);
    field("prompt_field", c.chat.prompt_field);
    field("instruction_field", c.chat.instruction_field);
    field("input_field", c.chat.input_field);
    field("chosen_field", c.chat.chosen_field);
    field("rejected_field", c.chat.rejected_field);
    field("answer_field", c.chat.answer_field);
    if (ch.contains("template_vars")) {
      VELA_CHECK(ch["template_vars"].is_object(), "config.chat.template_vars must be an object");
      c.chat.template_vars = ch["template_vars"];
    }
  } else if (j.contains("chat")) {
    VELA_CHECK(c.format == RecordFormat::kChat,
               "config.chat applies to format \"chat\" only (and to \"preference\" / \"prompt\")");
    const json& ch = j["chat"];
    std::string cw = "config.chat";
    check_keys(
        ch, cw,
        {"messages_field", "instruction_field", "input_field", "output_field", "template_vars"});
    c.chat.messages_field = get_string(ch, "messages_field", cw);
    c.chat.instruction_field = get_string(ch, "instruction_field", cw);
    c.chat.input_field = get_string(ch, "input_field", cw);
    c.chat.output_field = get_string(ch, "output_field", cw);
    if (ch.contains("template_vars")) {
      VELA_CHECK(ch["template_vars"].is_object(), "config.chat.template_vars must be an object");
      c.chat.template_vars = ch["template_vars"];
    }
    bool mapping = !c.chat.instruction_field.empty() || !c.chat.input_field.empty() ||
                   !c.chat.output_field.empty();
    VELA_CHECK(!(mapping && !c.chat.messages_field.empty()),
               "config.chat: give either messages_field or instruction/input/output fields, not "
               "both");
    VELA_CHECK(!mapping || !c.chat.output_field.empty(),
               "config.chat.output_field is required with instruction_field / input_field (the "
               "assistant turn is what is trained)");
  }
  if (c.format == RecordFormat::kChat && !c.chat.uses_role_mapping() &&
      c.chat.messages_field.empty())
    c.chat.messages_field = "messages";

  c.add_bos = get_bool(j, "add_bos", w, false);
  if (j.contains("add_eos")) c.add_eos = get_bool(j, "add_eos", w, true);
  c.bos_token = get_string(j, "bos_token", w);
  c.eos_token = get_string(j, "eos_token", w);
  c.seq_len = get_int(j, "seq_len", w, 2048, 2);
  c.max_length = get_int(j, "max_length", w, 0, 0);
  VELA_CHECK(c.max_length == 0 || c.max_length >= 2,
             "config.max_length must be >= 2 (or 0 for seq_len), got ", c.max_length);
  c.truncation = parse_truncation(get_string(j, "truncation", w, "truncate_right"));
  c.packing = get_bool(j, "packing", w, !rl);
  VELA_CHECK(!rl || !c.packing, "config.packing must be false for format \"", format,
             "\" (each record's sequences are rows of their own)");
  c.packing_window = get_int(j, "packing_window", w, 64, 1);
  VELA_CHECK(c.effective_max_length() <= c.seq_len, "config.max_length (", c.max_length,
             ") cannot exceed seq_len (", c.seq_len, "): a document must fit in one sequence");
  c.shard_tokens = get_int(j, "shard_tokens", w, int64_t{1} << 26, 1);
  VELA_CHECK(c.shard_tokens >= c.seq_len, "config.shard_tokens (", c.shard_tokens,
             ") must be >= seq_len (", c.seq_len, "): a sequence never straddles shards");
  c.threads = static_cast<int>(get_int(j, "threads", w, 0, 0));
  return c;
}

PreprocessConfig PreprocessConfig::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  VELA_CHECK_T(IoError, f.good(), "cannot open preprocess config '", path, "'");
  std::stringstream ss;
  ss << f.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    VELA_THROW(InvalidArgument, "preprocess config '", path, "' is not valid JSON: ", e.what());
  }
  return from_json(j);
}

json PreprocessConfig::to_json() const {
  json j;
  j["tokenizer"] = tokenizer;
  j["format"] = format_name(format);
  if (format == RecordFormat::kText) {
    j["sections"] = json::array();
    for (const auto& s : sections)
      j["sections"].push_back({{"field", s.field},
                               {"train", s.train},
                               {"optional", s.optional},
                               {"prefix", s.prefix},
                               {"suffix", s.suffix}});
  } else {
    json ch = json::object();
    if (format == RecordFormat::kPreference || format == RecordFormat::kPrompt) {
      ch["messages_field"] = chat.messages_field;
      ch["prompt_field"] = chat.prompt_field;
      ch["instruction_field"] = chat.instruction_field;
      ch["input_field"] = chat.input_field;
      if (format == RecordFormat::kPreference) {
        ch["chosen_field"] = chat.chosen_field;
        ch["rejected_field"] = chat.rejected_field;
      } else {
        ch["answer_field"] = chat.answer_field;
      }
    } else if (chat.uses_role_mapping()) {
      ch["instruction_field"] = chat.instruction_field;
      ch["input_field"] = chat.input_field;
      ch["output_field"] = chat.output_field;
    } else {
      ch["messages_field"] = chat.messages_field;
    }
    ch["template_vars"] = chat.template_vars;
    j["chat"] = ch;
  }
  j["add_bos"] = add_bos;
  j["add_eos"] = effective_add_eos();
  if (!bos_token.empty()) j["bos_token"] = bos_token;
  if (!eos_token.empty()) j["eos_token"] = eos_token;
  j["max_length"] = effective_max_length();
  j["truncation"] = truncation_name(truncation);
  j["packing"] = packing;
  j["packing_window"] = packing_window;
  j["seq_len"] = seq_len;
  j["shard_tokens"] = shard_tokens;
  j["threads"] = threads;
  return j;
}

}  // namespace vela
