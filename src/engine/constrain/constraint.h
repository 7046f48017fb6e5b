// Constraint: what a request asks its output to match (a JSON Schema, any JSON object, a regex, an
// EBNF grammar or a fixed list of choices), as plain text carried in SamplingParams. The engine
// compiles it (GrammarCompiler) when the request is submitted. Plain value type.
#pragma once

#include <string>

#include "core/json.h"

namespace vela {

struct Constraint {
  enum class Kind { kNone, kJsonSchema, kJsonObject, kRegex, kGrammar, kChoice, kToolCalls };
  Kind kind = Kind::kNone;
  // kJsonSchema: the schema as JSON text; kRegex: the pattern; kGrammar: GBNF text; kChoice: a
  // JSON array of strings; kJsonObject: empty; kToolCalls: a tool-call spec (tool_call_grammar.h).
  std::string text;

  bool active() const { return kind != Kind::kNone; }
  static Constraint json_schema(const json& schema) { return {Kind::kJsonSchema, schema.dump()}; }
  static Constraint json_object() { return {Kind::kJsonObject, ""}; }
  static Constraint regex(std::string re) { return {Kind::kRegex, std::move(re)}; }
  static Constraint grammar(std::string ebnf) { return {Kind::kGrammar, std::move(ebnf)}; }
  static Constraint choice(const json& strings) { return {Kind::kChoice, strings.dump()}; }
  static Constraint tool_calls(const json& spec) { return {Kind::kToolCalls, spec.dump()}; }
};

// "json_schema", "json_object", "regex", "grammar", "choice", "tool_calls" ("none" for kNone).
const char* constraint_kind_name(Constraint::Kind k);

}  // namespace vela
