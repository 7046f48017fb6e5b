// Chat prompt rendering and the tool_choice prefill.
#include "server/chat_prompt.h"

#include "server/api_error.h"
#include "server/tool_call_dialect.h"

namespace vela {

RenderedPrompt render_chat_prompt(const ServerContext& ctx, const ChatPrompt& p,
                                  const std::string& id_prefix) {
  if (!ctx.chat_template)
    throw ApiError(400,
                   "this model has no chat template (tokenizer_config.json chat_template); use "
                   "/v1/completions");
  bool use_tools = p.tools.is_array() && !p.tools.empty() && p.tool_choice != "none";
  if (p.tool_choice == "function") {
    bool known = false;
    if (p.tools.is_array())
      for (const json& t : p.tools)
        if (t.value("function", json::object()).value("name", "") == p.forced_tool) known = true;
    if (!known)
      throw ApiError(400,
                     "tool_choice names the function '" + p.forced_tool +
                         "', which is not among the request's tools",
                     "tool_choice");
  }
  if (p.tool_choice == "required" && !use_tools)
    throw ApiError(400, "tool_choice 'required' needs a non-empty tools list", "tool_choice");

  RenderedPrompt out;
  try {
    out.text = ctx.chat_template->render(p.messages, use_tools ? p.tools : json(nullptr), true,
                                         p.template_kwargs);
  } catch (const Error& e) {
    throw ApiError(400, "the chat template rejected the messages: " + clean_error_message(e.what()),
                   "messages");
  }
  const std::string& src = ctx.chat_template->source();
  out.output.reasoning = src.find("<think>") != std::string::npos;
  out.output.tools = use_tools;
  out.output.dialect = ctx.tool_dialect;
  out.output.id_prefix = id_prefix;
  if (use_tools && p.tool_choice == "required")
    out.output.forced_prefix = tool_call_forced_prefix(ctx.tool_dialect, "");
  if (use_tools && p.tool_choice == "function")
    out.output.forced_prefix = tool_call_forced_prefix(ctx.tool_dialect, p.forced_tool);
  if (out.output.reasoning && out.output.forced_prefix.empty()) {
    size_t end = out.text.find_last_not_of(" \n\r\t");
    std::string_view trimmed =
        std::string_view(out.text).substr(0, end == std::string::npos ? 0 : end + 1);
    out.output.reasoning_open =
        trimmed.size() >= 7 && trimmed.substr(trimmed.size() - 7) == "<think>";
  }
  out.text += out.output.forced_prefix;
  try {
    out.ids = ctx.tokenizer().encode(out.text, false);
  } catch (const Error& e) {
    throw ApiError(400, clean_error_message(e.what()), "messages");
  }
  return out;
}

Constraint tool_call_constraint(const ChatPrompt& p, const RenderedPrompt& rp,
                                const Constraint& response) {
  if (!rp.output.tools || !p.tools.is_array()) return response;
  const bool forced = !rp.output.forced_prefix.empty();
  bool any_strict = false;
  json tools = json::array();
  for (const json& t : p.tools) {
    const json fn = t.value("function", json::object());
    if (!fn.contains("name") || !fn["name"].is_string()) continue;
    if (p.tool_choice == "function" && fn["name"] != p.forced_tool) continue;
    const json strict = fn.value("strict", json(false));
    const bool is_strict = strict.is_boolean() && strict.get<bool>();
    any_strict = any_strict || is_strict;
    json params = forced || is_strict ? fn.value("parameters", json::object())
                                      : json{{"type", "object"}};  // any object
    tools.push_back({{"name", fn["name"]}, {"parameters", params}});
  }
  if (tools.empty()) return response;
  const json syntax = tool_call_grammar_syntax(rp.output.dialect);
  if (forced) {
    json spec = {{"tools", tools}, {"parallel", false}, {"syntax", syntax}};
    if (p.tool_choice == "function") spec["forced"] = p.forced_tool;
    return Constraint::tool_calls(spec);
  }
  if (p.tool_choice != "auto" || !any_strict) return response;
  json spec = {
      {"tools", tools}, {"parallel", p.parallel_tool_calls}, {"lazy", true}, {"syntax", syntax}};
  if (response.kind == Constraint::Kind::kJsonSchema)
    spec["content"] = json::parse(response.text);
  else if (response.kind == Constraint::Kind::kJsonObject)
    spec["content"] = {{"type", "object"}};
  else if (response.active())
    return response;
  return Constraint::tool_calls(spec);
}

}  // namespace vela
