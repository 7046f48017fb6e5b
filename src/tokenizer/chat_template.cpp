// ChatTemplate: loading chat templates from tokenizer_config.json and rendering them with the
// Jinja engine (jinja_*.cpp) using the variables transformers passes to apply_chat_template.
#include "tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_parser.h"

namespace vela {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  VELA_CHECK_T(IoError, in.good(), "cannot open ", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A special token as tokenizer_config.json writes it: "text" or {"content": "text", ...}.
std::string token_text(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  VELA_THROW(InvalidArgument, "tokenizer_config.json: ", key,
             " must be a string or an object with \"content\"");
}

}  // namespace

ChatTemplate ChatTemplate::from_tokenizer_config(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path config_path = path;
  fs::path jinja_path;
  if (fs::is_directory(config_path)) {
    jinja_path = config_path / "chat_template.jinja";
    config_path /= "tokenizer_config.json";
  }
  json config;
  try {
    config = json::parse(read_file(config_path));
  } catch (const json::parse_error& e) {
    VELA_THROW(InvalidArgument, config_path.string(), " is not valid JSON: ", e.what());
  }
  VELA_CHECK(config.is_object(), config_path.string(), " must hold a JSON object");
  std::string source;
  if (!jinja_path.empty() && fs::exists(jinja_path)) {
    source = read_file(jinja_path);
  } else {
    auto it = config.find("chat_template");
    VELA_CHECK(it != config.end() && !it->is_null(), config_path.string(),
               " has no chat_template");
    if (it->is_string()) {
      source = it->get<std::string>();
    } else {
      VELA_CHECK(it->is_array(), config_path.string(),
                 ": chat_template must be a string or a list of {name, template}");
      std::string names;
      for (const auto& entry : *it) {
        VELA_CHECK(entry.is_object() && entry.contains("name") && entry.contains("template") &&
                       entry["name"].is_string() && entry["template"].is_string(),
                   config_path.string(), ": chat_template entries must be {name, template}");
        if (entry["name"] == "default") source = entry["template"].get<std::string>();
        names += (names.empty() ? "" : ", ") + entry["name"].get<std::string>();
      }
      VELA_CHECK(!source.empty(), config_path.string(),
                 ": chat_template has no \"default\" entry (has: ", names, ")");
    }
  }
  return ChatTemplate(std::move(source), token_text(config, "bos_token"),
                      token_text(config, "eos_token"));
}

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      clock_(jinja::system_local_time) {
  try {
    program_ = std::make_shared<const jinja::Program>(jinja::parse_template(source_));
  } catch (const jinja::TemplateError& e) {
    throw InvalidArgument("chat template syntax error (line " + std::to_string(e.line()) +
                          "): " + e.message());
  }
}

void ChatTemplate::set_clock(std::function<std::tm()> clock) { clock_ = std::move(clock); }

std::string ChatTemplate::render(const json& messages, const json& tools,
                                 bool add_generation_prompt, const json& extra) const {
  VELA_CHECK(messages.is_array(), "chat template: messages must be a JSON array");
  VELA_CHECK(tools.is_null() || tools.is_array(), "chat template: tools must be a JSON array or null");
  VELA_CHECK(extra.is_object() || extra.is_null(), "chat template: extra variables must be an object");
  using jinja::Value;
  auto globals = std::make_shared<jinja::Scope>();
  globals->set("messages", Value::from_json(messages));
  globals->set("tools", Value::from_json(tools));
  globals->set("documents", Value(nullptr));
  globals->set("add_generation_prompt", Value(add_generation_prompt));
  if (!bos_token_.empty()) globals->set("bos_token", Value(bos_token_));
  if (!eos_token_.empty()) globals->set("eos_token", Value(eos_token_));
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it)
      globals->set(it.key(), Value::from_json(it.value()));
  try {
    jinja::Interpreter interpreter(clock_);
    return interpreter.render(*program_, globals);
  } catch (const jinja::TemplateError& e) {
    throw InvalidArgument("chat template error (line " + std::to_string(e.line()) +
                          "): " + e.message());
  }
}

}  // namespace vela
