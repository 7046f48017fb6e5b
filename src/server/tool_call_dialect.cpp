// ToolCallDialect: the dialect table, template detection and the parser factory.
#include "server/tool_call_dialect.h"

#include "core/error.h"
#include "core/log.h"
#include "server/hermes_tool_call_parser.h"
#include "server/llama3_json_tool_call_parser.h"

namespace vela {

namespace {
const ToolCallSyntax kHermes{"<tool_call>\n{\"name\": \"",
                             ", \"arguments\": ",
                             "}\n</tool_call>",
                             "\n",
                             "<tool_call>",
                             false};
// Llama 3.1's template renders a past call as {"name": "fn", "parameters": ARGS}; vLLM's
// llama3_json parser reads calls joined by "; ".
const ToolCallSyntax kLlama3Json{"{\"name\": \"", ", \"parameters\": ", "}", "; ", "{", true};
}  // namespace

const char* tool_call_dialect_name(ToolCallDialect d) {
  return d == ToolCallDialect::kLlama3Json ? "llama3_json" : "hermes";
}

ToolCallDialect parse_tool_call_dialect(std::string_view name) {
  if (name == "hermes") return ToolCallDialect::kHermes;
  if (name == "llama3_json") return ToolCallDialect::kLlama3Json;
  VELA_THROW(InvalidArgument, "unknown tool-call parser '", name,
             "' (expected hermes or llama3_json)");
}

ToolCallDialect detect_tool_call_dialect(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<tool_call>")) return ToolCallDialect::kHermes;
  if (has("<|start_header_id|>") && (has("<|python_tag|>") || has("\"parameters\"")))
    return ToolCallDialect::kLlama3Json;
  if (has("tools"))
    VELA_LOG_DEBUG("[serve] the chat template renders tools in no known tool-call syntax: using "
                   "hermes (--tool-call-parser picks another)");
  return ToolCallDialect::kHermes;
}

ToolCallDialect choose_tool_call_dialect(const std::string& configured,
                                         const std::string* template_source) {
  if (!configured.empty()) {
    ToolCallDialect d = parse_tool_call_dialect(configured);
    VELA_LOG_INFO("[serve] tool calls: ", tool_call_dialect_name(d), " (--tool-call-parser)");
    return d;
  }
  if (!template_source) return ToolCallDialect::kHermes;
  ToolCallDialect d = detect_tool_call_dialect(*template_source);
  VELA_LOG_INFO("[serve] tool calls: ", tool_call_dialect_name(d), " (from the chat template)");
  return d;
}

const ToolCallSyntax& tool_call_syntax(ToolCallDialect d) {
  return d == ToolCallDialect::kLlama3Json ? kLlama3Json : kHermes;
}

std::string tool_call_forced_prefix(ToolCallDialect d, const std::string& forced_name) {
  const ToolCallSyntax& s = tool_call_syntax(d);
  if (forced_name.empty()) return s.call_open;
  // call_open already holds the name's opening quote.
  return s.call_open + json(forced_name).dump().substr(1) + s.args_key;
}

json tool_call_grammar_syntax(ToolCallDialect d) {
  const ToolCallSyntax& s = tool_call_syntax(d);
  return {{"call_open", s.call_open}, {"args_key", s.args_key}, {"call_close", s.call_close},
          {"separator", s.separator}, {"trigger", s.trigger},   {"whole_answer", s.whole_answer}};
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolCallDialect d, std::string id_prefix) {
  if (d == ToolCallDialect::kLlama3Json)
    return std::make_unique<Llama3JsonToolCallParser>(std::move(id_prefix));
  return std::make_unique<HermesToolCallParser>(std::move(id_prefix));
}

}  // namespace vela
