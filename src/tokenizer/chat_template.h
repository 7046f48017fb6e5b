// Chat templates: renders a model's Jinja chat template (tokenizer_config.json) exactly like
// transformers' apply_chat_template does with Python Jinja2 (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False),
// raise_exception, strftime_now). The template is parsed once; render() is const and
// thread-safe. Template syntax errors and render errors throw InvalidArgument naming the line.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include "core/json.h"

namespace vela {

namespace jinja {
struct Program;
}

class ChatTemplate {
 public:
  // Reads tokenizer_config.json (a directory or the file): chat_template (a string, or a list of
  // {name, template} where "default" is used), bos_token / eos_token (a string or
  // {"content": ...}). In a directory, a chat_template.jinja file takes precedence, as in
  // transformers. Throws IoError when unreadable, InvalidArgument when malformed.
  static ChatTemplate from_tokenizer_config(const std::string& path);

  // Parses `source`; throws InvalidArgument with the line number on a syntax error. Empty tokens
  // are left undefined in the template (transformers omits unset special tokens).
  ChatTemplate(std::string source, std::string bos_token = "", std::string eos_token = "");

  // messages: a JSON array of message objects; tools: a JSON array or null (passed as None);
  // extra: more template variables (e.g. {"enable_thinking": false}), overriding the defaults.
  // Throws InvalidArgument for render errors (undefined methods, type errors,
  // raise_exception('...')) with the template line and message.
  std::string render(const json& messages, const json& tools, bool add_generation_prompt,
                     const json& extra = json::object()) const;

  // The local time strftime_now() formats; tests pin it. Not thread-safe against render().
  void set_clock(std::function<std::tm()> clock);

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::shared_ptr<const jinja::Program> program_;
  std::function<std::tm()> clock_;
};

}  // namespace vela
