// Tool calls in the Hermes / Qwen format, constrained so the arguments are valid against each
// tool's JSON Schema:  <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
// The server prefills the opening of the first call (chat_prompt.cpp); the grammar matches what
// the model writes after that prefill:
//   spec = {"tools": [{"name": ..., "parameters": {schema}}, ...],
//           "forced": "NAME" | null,         // named tool_choice: the prefill ends at "arguments":
//           "parallel": true | false}         // further calls may follow the first one
// Without "forced" the prefill ends at {"name": " and the grammar picks among the tools' names.
// "lazy": true (tool_choice auto with strict tools; nothing is prefilled) is a lazily triggered
// grammar: any text that does not contain "<tool_call>" (reasoning included), then optionally
// the calls, each opened by "<tool_call>\n{\"name\": \"" and fully constrained, then the end.
// With "content": {schema} (response_format beside strict tools) the text must instead be a JSON
// value of that schema. A tool whose "parameters" is {"type": "object"} takes any object.
// Throws InvalidArgument for a bad spec or a tool schema outside the JSON Schema subset (the
// message names the tool).
#pragma once

#include "core/json.h"
#include "engine/constrain/grammar.h"

namespace vela::constrain {

Grammar tool_call_grammar(const json& spec);

}  // namespace vela::constrain
