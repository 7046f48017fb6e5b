// tool_call_grammar: one rule per tool's arguments (its schema), glued by the dialect's call
// syntax (Hermes by default).
#include "engine/constrain/tool_call_grammar.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "engine/constrain/json_schema.h"

namespace vela::constrain {

namespace {
struct Syntax {
  std::string call_open = "<tool_call>\n{\"name\": \"";
  std::string args_key = ", \"arguments\": ";
  std::string call_close = "}\n</tool_call>";
  std::string separator = "\n";
  std::string trigger = "<tool_call>";
  bool whole_answer = false;
};

Syntax read_syntax(const json& spec) {
  Syntax s;
  if (!spec.contains("syntax") || spec["syntax"].is_null()) return s;
  const json& j = spec["syntax"];
  VELA_CHECK(j.is_object(), "tool_calls constraint: \"syntax\" must be an object");
  const std::pair<const char*, std::string*> fields[] = {{"call_open", &s.call_open},
                                                         {"args_key", &s.args_key},
                                                         {"call_close", &s.call_close},
                                                         {"separator", &s.separator},
                                                         {"trigger", &s.trigger}};
  for (auto [key, field] : fields)
    if (j.contains(key)) {
      VELA_CHECK(j[key].is_string(), "tool_calls constraint: syntax.", key, " must be a string");
      *field = j[key].get<std::string>();
    }
  s.whole_answer = j.value("whole_answer", false);
  VELA_CHECK(!s.call_open.empty() && s.call_open.back() == '"',
             "tool_calls constraint: syntax.call_open must end with the name's opening quote");
  return s;
}

// Text whose first non-whitespace byte is not '{' (or only whitespace): a reply that is not a
// Llama 3 JSON call.
Expr text_not_json() {
  ByteSet ws, all, first;
  for (char c : {' ', '\t', '\n', '\r'}) ws.set(static_cast<uint8_t>(c));
  all.set();
  first = ~ws;
  first.reset(static_cast<uint8_t>('{'));
  return Expr::seq(
      {Expr::star(Expr::byte_set(ws)),
       Expr::optional(Expr::seq({Expr::byte_set(first), Expr::star(Expr::byte_set(all))}))});
}
}  // namespace

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
  const Syntax syn = read_syntax(spec);
  const Expr close = Expr::literal(syn.call_close);
  // After {"name": " : one of the names, then the arguments.
  std::vector<Expr> by_name;
  for (const auto& [name, rule] : tools) {
    std::string quoted = json(name).dump();  // "name" with JSON escapes
    by_name.push_back(
        Expr::seq({Expr::literal(quoted.substr(1) + syn.args_key), Expr::ref(rule), close}));
  }
  const int32_t call_rest = g.add_rule("call-rest", Expr::alt(std::move(by_name)));
  const Expr opener = Expr::literal(syn.call_open);
  const Expr sep = Expr::literal(syn.separator);
  const bool parallel = spec.value("parallel", false);
  if (spec.value("lazy", false)) {
    // tool_choice auto: free text (or, with "content", a JSON value of that schema) or calls.
    std::vector<Expr> calls{opener, Expr::ref(call_rest)};
    if (parallel) calls.push_back(Expr::star(Expr::seq({sep, opener, Expr::ref(call_rest)})));
    Expr text;
    if (spec.contains("content") && !spec["content"].is_null()) {
      try {
        text = Expr::ref(add_json_schema_rule(g, spec["content"]));
      } catch (const InvalidArgument& e) {
        VELA_THROW(InvalidArgument, "response_format: ", e.what());
      }
      g.root = g.add_rule("root", Expr::alt({std::move(text), Expr::seq(std::move(calls))}));
    } else if (syn.whole_answer) {
      g.root = g.add_rule("root", Expr::alt({text_not_json(), Expr::seq(std::move(calls))}));
    } else {
      text = text_without(syn.trigger);
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
  if (parallel) root.push_back(Expr::star(Expr::seq({sep, opener, Expr::ref(call_rest)})));
  g.root = g.add_rule("root", Expr::seq(std::move(root)));
  return g;
}

}  // namespace vela::constrain
