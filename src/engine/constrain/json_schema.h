// JSON Schema and generic JSON as grammars. The subset is what OpenAI Structured Outputs accepts
// and then some: type (one or a list), properties / required / additionalProperties (false when
// absent, as strict mode; true or a schema allow extra keys after the listed ones), enum, const,
// anyOf / oneOf (oneOf as anyOf), allOf of one schema, items / prefixItems / minItems / maxItems,
// string minLength / maxLength / pattern / format (date, time, date-time, uuid, email), integer
// minimum / maximum / exclusive bounds, number bounds >= 0, nullable, $defs / definitions and
// local $ref (recursion allowed). Annotations (title, description, default, examples, ...) are
// ignored. Anything else that constrains values throws InvalidArgument naming the keyword and the
// schema path, never a silently looser grammar.
//
// Output form: properties in schema order; whitespace between tokens is limited to at most
// max_whitespace characters (0 = compact JSON); integers up to 16 digits, fractions up to 16,
// exponents up to 2 (so every number is finite in IEEE double).
#pragma once

#include "core/json.h"
#include "engine/constrain/grammar.h"

namespace vela::constrain {

struct JsonGrammarOptions {
  int32_t max_whitespace = 16;
};

Grammar json_schema_grammar(const json& schema, const JsonGrammarOptions& opt = {});
// The schema compiled into an existing grammar (its $refs resolve within `schema`); returns the
// id of the rule that matches one value.
int32_t add_json_schema_rule(Grammar& g, const json& schema, const JsonGrammarOptions& opt = {});
// Any JSON value whose top level is an object (OpenAI's json_object mode).
Grammar json_object_grammar(const JsonGrammarOptions& opt = {});
// Exactly one of the strings (vLLM's guided_choice).
Grammar choice_grammar(const std::vector<std::string>& choices);

}  // namespace vela::constrain
