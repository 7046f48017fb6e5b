// tool_call_grammar: one rule per tool's arguments (its schema), glued by the Hermes call syntax.
#include "engine/constrain/tool_call_grammar.h"

#include "core/error.h"
#include "engine/constrain/json_schema.h"

namespace vela::constrain {

Grammar tool_call_grammar(const json& spec) {
  VELA_CHECK(spec.is_object() && spec.contains("tools") && spec["tools"].is_array() &&
                 !spec["tools"].empty(),
             "tool_calls constraint: needs a non-empty \"tools\" list");
  Grammar g;
  std::vector<std::pair<std::string, int32_t>> tools;  // name, arguments rule
  for (const json& t : spec["tools"]) {
    VELA_CHECK(t.is_object() && t.contains("name") && t["name"].is_string(),
               "tool_calls constraint: every tool needs a name");
    const std::string name = t["name"].get<std::string>();
    json params = t.value("parameters", json::object());
    if (params.is_null() || (params.is_object() && params.empty()))
      params = {{"type", "object"}, {"properties", json::object()}};
    try {
      tools.emplace_back(name, add_json_schema_rule(g, params));
    } catch (const InvalidArgument& e) {
      VELA_THROW(InvalidArgument, "tool '", name, "' parameters: ", e.what());
    }
  }
  const Expr close = Expr::literal("}\n</tool_call>");
  // After {"name": " : one of the names, then the arguments.
  std::vector<Expr> by_name;
  for (const auto& [name, rule] : tools) {
    std::string quoted = json(name).dump();  // "name" with JSON escapes
    by_name.push_back(
        Expr::seq({Expr::literal(quoted.substr(1) + ", \"arguments\": "), Expr::ref(rule), close}));
  }
  const int32_t call_rest = g.add_rule("call-rest", Expr::alt(std::move(by_name)));
  const Expr opener = Expr::literal("<tool_call>\n{\"name\": \"");
  const bool parallel = spec.value("parallel", false);
  if (spec.value("lazy", false)) {
    // tool_choice auto: free text (or, with "content", a JSON value of that schema) or calls.
    std::vector<Expr> calls{opener, Expr::ref(call_rest)};
    if (parallel) calls.push_back(Expr::star(Expr::seq({Expr::byte('\n'), opener, Expr::ref(call_rest)})));
    Expr text;
    if (spec.contains("content") && !spec["content"].is_null()) {
      try {
        text = Expr::ref(add_json_schema_rule(g, spec["content"]));
      } catch (const InvalidArgument& e) {
        VELA_THROW(InvalidArgument, "response_format: ", e.what());
      }
      g.root = g.add_rule("root", Expr::alt({std::move(text), Expr::seq(std::move(calls))}));
    } else {
      text = text_without("<tool_call>");
      g.root = g.add_rule("root", Expr::seq({std::move(text), Expr::optional(Expr::seq(std::move(calls)))}));
    }
    return g;
  }
  Expr first;
  if (spec.contains("forced") && spec["forced"].is_string()) {
    const std::string forced = spec["forced"].get<std::string>();
    int32_t rule = -1;
    for (const auto& [name, r] : tools)
      if (name == forced) rule = r;
    VELA_CHECK(rule >= 0, "tool_calls constraint: the forced tool '", forced, "' is not in tools");
    first = Expr::seq({Expr::ref(rule), close});
  } else {
    first = Expr::ref(call_rest);
  }
  std::vector<Expr> root{std::move(first)};
  if (parallel)
    root.push_back(Expr::star(Expr::seq({Expr::byte('\n'), opener, Expr::ref(call_rest)})));
  g.root = g.add_rule("root", Expr::seq(std::move(root)));
  return g;
}

}  // namespace vela::constrain
