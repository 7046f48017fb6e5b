// ToolCallDialect: how a model family writes tool calls, and everything the server derives from
// it — the assistant text prefilled for tool_choice required / a named tool, the call syntax the
// tool-call grammar glues the argument schemas with (tool_call_grammar.h "syntax"), and the
// streaming parser of its replies.
//   hermes       Qwen 2.5 / 3, Hermes:  <tool_call>\n{"name": ..., "arguments":
//   {...}}\n</tool_call>
//                (several blocks, text around them)
//   llama3_json  Llama 3.1 / 3.2 / 3.3:  {"name": ..., "parameters": {...}} as the whole reply,
//                optionally after <|python_tag|>, several calls joined by "; " (vLLM's llama3_json)
// The dialect is detected from the chat template source (detect_tool_call_dialect) unless
// `vela serve --tool-call-parser NAME` / the config key tool_call_parser names one. Stateless
// functions; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/json.h"
#include "server/tool_call_parser.h"

namespace vela {

enum class ToolCallDialect { kHermes, kLlama3Json };

// The pieces of one call: call_open NAME args_key ARGS call_close; calls joined by separator.
struct ToolCallSyntax {
  std::string call_open;   // ends with the opening quote of the name
  std::string args_key;    // after the name's closing quote, up to the arguments value
  std::string call_close;  // after the arguments value
  std::string separator;   // between two calls
  std::string trigger;     // free text ends where this appears (tool_choice auto, lazy grammar)
  // The call is the whole reply (no text around it): under tool_choice auto a lazy grammar
  // allows either text whose first non-whitespace byte is not '{', or the calls alone.
  bool whole_answer = false;
};

const char* tool_call_dialect_name(ToolCallDialect d);  // "hermes", "llama3_json"
// Throws InvalidArgument naming the known dialects for anything else.
ToolCallDialect parse_tool_call_dialect(std::string_view name);
// From a chat template's source: `<tool_call>` -> hermes; Llama 3 header tokens with
// <|python_tag|> or a "parameters" key -> llama3_json; otherwise hermes (logged at debug when
// the template mentions tools).
ToolCallDialect detect_tool_call_dialect(std::string_view template_source);
// The served dialect: `configured` (a name; throws InvalidArgument when unknown) or, when empty,
// detected from the template (hermes without one). Logs the choice at info.
ToolCallDialect choose_tool_call_dialect(const std::string& configured,
                                         const std::string* template_source);

const ToolCallSyntax& tool_call_syntax(ToolCallDialect d);
// The assistant text that opens a call: up to the name's opening quote (tool_choice required,
// `forced_name` empty) or through the name up to the arguments (a named tool).
std::string tool_call_forced_prefix(ToolCallDialect d, const std::string& forced_name);
// tool_call_grammar.h's "syntax" object for the dialect.
json tool_call_grammar_syntax(ToolCallDialect d);
std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolCallDialect d, std::string id_prefix);

}  // namespace vela
