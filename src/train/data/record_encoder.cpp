// RecordEncoder: JSON record -> tokens + loss mask (text sections or a rendered chat).
#include "train/data/record_encoder.h"

#include <vector>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vela {
namespace {

EncodeResult bad(const char* reason, std::string detail) {
  EncodeResult r;
  r.bad_reason = reason;
  r.detail = std::move(detail);
  return r;
}

std::optional<int32_t> special_id(const Tokenizer& tok, const std::string& name,
                                  std::optional<int32_t> fallback, const char* key) {
  if (name.empty()) return fallback;
  auto id = tok.token_to_id(name);
  VELA_CHECK(id.has_value(), "config.", key, " '", name, "' is not a token of the tokenizer");
  return id;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

RecordEncoder::RecordEncoder(const PreprocessConfig& config, const Tokenizer& tokenizer,
                             const ChatTemplate* chat_template)
    : config_(config), tokenizer_(tokenizer), chat_template_(chat_template) {
  bos_id_ = special_id(tokenizer, config.bos_token, tokenizer.bos_id(), "bos_token");
  eos_id_ = special_id(tokenizer, config.eos_token, tokenizer.eos_id(), "eos_token");
  VELA_CHECK(!config.add_bos || bos_id_, "config.add_bos is true but the tokenizer has no BOS ",
             "token: set config.bos_token");
  VELA_CHECK(!config.effective_add_eos() || eos_id_,
             "config.add_eos is true but the tokenizer has no EOS token: set config.eos_token "
             "(e.g. \"<|endoftext|>\") or add_eos false");
  VELA_CHECK(config.format == RecordFormat::kText || chat_template_ != nullptr, "format \"",
             format_name(config.format),
             "\" needs the tokenizer's chat template (tokenizer_config.json)");
}

void RecordEncoder::append(EncodedDoc& doc, std::string_view text, bool train) const {
  if (text.empty()) return;
  std::vector<int32_t> ids = tokenizer_.encode(text, /*add_special_tokens=*/false);
  doc.tokens.insert(doc.tokens.end(), ids.begin(), ids.end());
  doc.mask.insert(doc.mask.end(), ids.size(), train ? 1 : 0);
}

EncodeResult RecordEncoder::encode(std::string_view line) const {
  json record;
  try {
    record = json::parse(line.begin(), line.end());
  } catch (const json::parse_error& e) {
    return bad("invalid_json", e.what());
  }
  return encode_record(record);
}

EncodeResult RecordEncoder::encode_record(const json& record) const {
  if (!record.is_object()) return bad("not_an_object", std::string("a ") + record.type_name());
  EncodeResult r;
  try {
    switch (config_.format) {
      case RecordFormat::kText: r = encode_text(record); break;
      case RecordFormat::kChat: r = encode_chat(record); break;
      case RecordFormat::kPreference: r = encode_preference(record); break;
      case RecordFormat::kPrompt: r = encode_prompt(record); break;
    }
  } catch (const Error& e) {
    // The tokenizer rejects invalid UTF-8 (JSON escapes can produce lone surrogates).
    return bad("tokenize_error", e.what());
  }
  if (!r.ok()) return r;
  for (EncodedDoc* d : {&r.doc, &r.rejected}) {
    if (d == &r.rejected && config_.format != RecordFormat::kPreference) break;
    if (config_.add_bos) {
      d->tokens.insert(d->tokens.begin(), *bos_id_);
      d->mask.insert(d->mask.begin(), 0);
    }
    if (config_.effective_add_eos() && config_.format != RecordFormat::kPrompt) {
      d->tokens.push_back(*eos_id_);
      d->mask.push_back(1);
    }
  }
  return r;
}

EncodeResult RecordEncoder::encode_text(const json& record) const {
  EncodeResult r;
  for (const TextSection& s : config_.sections) {
    auto it = record.find(s.field);
    if (it == record.end() || it->is_null()) {
      if (s.optional) continue;
      return bad("missing_field", "no field '" + s.field + "'");
    }
    if (!it->is_string())
      return bad("wrong_type",
                 "field '" + s.field + "' is a " + it->type_name() + ", not a string");
    std::string text = s.prefix + it->get_ref<const std::string&>() + s.suffix;
    append(r.doc, text, s.train);
  }
  return r;
}

EncodeResult RecordEncoder::encode_chat(const json& record) const {
  const ChatFields& cf = config_.chat;
  json messages = json::array();
  if (cf.uses_role_mapping()) {
    auto add = [&](const std::string& field, const char* role, bool required) -> std::string {
      if (field.empty()) return "";
      auto it = record.find(field);
      if (it == record.end() || it->is_null())
        return required ? "missing_field:no field '" + field + "'" : "";
      if (!it->is_string())
        return "wrong_type:field '" + field + "' is a " + it->type_name() + ", not a string";
      const std::string& v = it->get_ref<const std::string&>();
      if (v.empty()) return required ? "empty:field '" + field + "' is empty" : "";
      messages.push_back({{"role", role}, {"content", v}});
      return "";
    };
    for (auto [field, role, required] : {std::tuple{cf.instruction_field, "system", false},
                                         std::tuple{cf.input_field, "user", false},
                                         std::tuple{cf.output_field, "assistant", true}}) {
      std::string err = add(field, role, required);
      if (!err.empty()) {
        size_t colon = err.find(':');
        EncodeResult r;
        r.bad_reason = err.substr(0, colon);
        r.detail = err.substr(colon + 1);
        return r;
      }
    }
  } else {
    auto it = record.find(cf.messages_field);
    if (it == record.end() || it->is_null())
      return bad("missing_field", "no field '" + cf.messages_field + "'");
    if (!it->is_array() || it->empty())
      return bad("wrong_type", "field '" + cf.messages_field + "' is not a non-empty array");
    for (const json& m : *it) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          !m.contains("content") || !m["content"].is_string())
        return bad("wrong_type", "a message is not {\"role\": string, \"content\": string}");
    }
    messages = *it;
  }
  json tools = nullptr;  // a record's "tools" (function schemas) go to the template
  if (auto t = record.find("tools"); t != record.end() && !t->is_null()) {
    if (!t->is_array()) return bad("wrong_type", "field 'tools' is not an array");
    tools = *t;
  }
  return encode_messages(messages, tools);
}

EncodeResult RecordEncoder::prompt_messages(const json& record, json* messages) const {
  const ChatFields& cf = config_.chat;
  auto check_list = [&](const json& v, const std::string& field) -> EncodeResult {
    if (!v.is_array() || v.empty())
      return bad("wrong_type", "field '" + field + "' is not a non-empty array of messages");
    for (const json& m : v)
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          !m.contains("content") || !m["content"].is_string())
        return bad("wrong_type", "a message of '" + field +
                                     "' is not {\"role\": string, \"content\": string}");
    return {};
  };
  *messages = json::array();
  if (auto it = record.find(cf.messages_field); it != record.end() && !it->is_null()) {
    EncodeResult r = check_list(*it, cf.messages_field);
    if (!r.ok()) return r;
    *messages = *it;
    return {};
  }
  if (auto it = record.find(cf.prompt_field); it != record.end() && !it->is_null()) {
    if (it->is_string()) {
      messages->push_back({{"role", "user"}, {"content", *it}});
      return {};
    }
    EncodeResult r = check_list(*it, cf.prompt_field);
    if (!r.ok()) return r;
    *messages = *it;
    return {};
  }
  // The seeds' role mapping: instruction -> system, input -> user.
  for (auto [field, role] :
       {std::pair{cf.instruction_field, "system"}, std::pair{cf.input_field, "user"}}) {
    auto it = record.find(field);
    if (field.empty() || it == record.end() || it->is_null()) continue;
    if (!it->is_string())
      return bad("wrong_type",
                 "field '" + field + "' is a " + it->type_name() + ", not a string");
    if (!it->get_ref<const std::string&>().empty())
      messages->push_back({{"role", role}, {"content", *it}});
  }
  if (messages->empty())
    return bad("missing_prompt", "no prompt: none of the fields '" + cf.messages_field + "', '" +
                                     cf.prompt_field + "', '" + cf.instruction_field + "', '" +
                                     cf.input_field + "'");
  return {};
}

EncodeResult RecordEncoder::encode_preference(const json& record) const {
  const ChatFields& cf = config_.chat;
  json prompt;
  EncodeResult p = prompt_messages(record, &prompt);
  if (!p.ok()) return p;
  EncodeResult out;
  for (auto [field, reason, doc] : {std::tuple{cf.chosen_field, "missing_chosen", &out.doc},
                                    std::tuple{cf.rejected_field, "missing_rejected",
                                               &out.rejected}}) {
    auto it = record.find(field);
    if (it == record.end() || it->is_null())
      return bad(reason, "a preference record needs '" + cf.chosen_field + "' and '" +
                             cf.rejected_field + "'; this one has no '" + field + "'");
    json messages = prompt;
    if (it->is_string()) {
      messages.push_back({{"role", "assistant"}, {"content", *it}});
    } else if (it->is_array() && !it->empty()) {
      for (const json& m : *it) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
            !m.contains("content") || !m["content"].is_string())
          return bad("wrong_type", "a message of '" + field +
                                       "' is not {\"role\": string, \"content\": string}");
        messages.push_back(m);
      }
    } else {
      return bad("wrong_type", "field '" + field + "' is neither a string nor a message list");
    }
    if (messages.back()["role"] != "assistant")
      return bad("wrong_type", "field '" + field + "' does not end with an assistant turn");
    EncodeResult r = encode_messages(messages, nullptr);
    if (!r.ok()) return r;
    // Only the response (the last assistant turn) is trained.
    std::vector<uint8_t>& mask = r.doc.mask;
    size_t end = mask.size();
    while (end > 0 && mask[end - 1] == 0) --end;
    size_t start = end;
    while (start > 0 && mask[start - 1] == 1) --start;
    for (size_t i = 0; i < start; ++i) mask[i] = 0;
    *doc = std::move(r.doc);
  }
  return out;
}

EncodeResult RecordEncoder::encode_prompt(const json& record) const {
  json prompt;
  EncodeResult r = prompt_messages(record, &prompt);
  if (!r.ok()) return r;
  std::string text;
  try {
    text = chat_template_->render(prompt, nullptr, /*add_generation_prompt=*/true,
                                  config_.chat.template_vars);
  } catch (const Error& e) {
    return bad("template_error", e.what());
  }
  append(r.doc, text, false);
  if (r.doc.tokens.empty()) return bad("empty", "the rendered prompt is empty");
  if (auto it = record.find(config_.chat.answer_field); it != record.end() && !it->is_null())
    r.answer = it->is_string() ? it->get<std::string>() : it->dump();
  return r;
}

EncodeResult RecordEncoder::encode_messages(const json& messages, const json& tools) const {
  // A record's "tools" (a list of function schemas) go to the template, as transformers does.
  const ChatFields& cf = config_.chat;
  const ChatTemplate& tpl = *chat_template_;
  const json& vars = cf.template_vars;
  auto render = [&](size_t n, bool gen) {
    json part = json::array();
    for (size_t k = 0; k < n; ++k) part.push_back(messages[k]);
    return tpl.render(part, tools, gen, vars);
  };
  std::string full;
  std::vector<std::pair<size_t, size_t>> spans;  // trained [start, end) byte ranges of `full`
  try {
    full = render(messages.size(), false);
    for (size_t i = 0; i < messages.size(); ++i) {
      if (messages[i]["role"] != "assistant") continue;
      std::string prefix = render(i, true);
      size_t start = prefix.size(), end = std::string::npos;
      if (!starts_with(full, prefix)) {
        // The generation prompt differs from how the template renders this turn in history
        // (Qwen3 with enable_thinking=false and no user turn: no empty <think> block). The turn
        // then starts where the two diverge, provided the history itself renders identically.
        std::string history = render(i, false);
        size_t common = 0;
        while (common < prefix.size() && common < full.size() && prefix[common] == full[common])
          ++common;
        if (!starts_with(full, history) || common < history.size())
          return bad("template_not_prefix_stable",
                     "the rendered prompt before assistant message " + std::to_string(i) +
                         " is not a prefix of the whole conversation");
        start = common;
      }
      std::string through = render(i + 1, false);
      if (starts_with(full, through)) {
        end = through.size();
      } else {
        // The template renders a last turn differently (Qwen3: empty <think> block): find the
        // content in `full` and the end-of-turn text that follows it in `through`.
        const std::string& content = messages[i]["content"].get_ref<const std::string&>();
        size_t at_through = through.rfind(content);
        size_t at_full = content.empty() ? std::string::npos : full.find(content, start);
        if (at_through != std::string::npos && at_full != std::string::npos) {
          std::string tail = through.substr(at_through + content.size());
          size_t after = at_full + content.size();
          if (full.compare(after, tail.size(), tail) == 0) end = after + tail.size();
        }
      }
      if (end == std::string::npos || end <= start ||
          (!spans.empty() && start < spans.back().second))
        return bad("template_not_prefix_stable", "cannot locate assistant message " +
                                                     std::to_string(i) +
                                                     " in the rendered conversation");
      spans.emplace_back(start, end);
    }
  } catch (const Error& e) {
    return bad("template_error", e.what());
  }
  if (spans.empty()) return bad("no_assistant_turn", "no assistant message to train on");

  EncodeResult r;
  std::string_view f = full;
  size_t at = 0;
  for (auto [s, e] : spans) {
    append(r.doc, f.substr(at, s - at), false);
    append(r.doc, f.substr(s, e - s), true);
    at = e;
  }
  append(r.doc, f.substr(at), false);
  return r;
}

}  // namespace vela
