// Tool calls constrained so the arguments are valid against each tool's JSON Schema, in the call
// syntax of the model's tool-call dialect (server/tool_call_dialect.h). The default syntax is
// Hermes / Qwen:  <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
// The server prefills the opening of the first call (chat_prompt.cpp); the grammar matches what
// the model writes after that prefill:
//   spec = {"tools": [{"name": ..., "parameters": {schema}}, ...],
//           "forced": "NAME" | null,         // named tool_choice: the prefill ends at "arguments":
//           "parallel": true | false,        // further calls may follow the first one
//           "syntax": {...} | absent}        // the dialect's pieces (below); absent = Hermes
// Without "forced" the prefill ends at {"name": " and the grammar picks among the tools' names.
// "lazy": true (tool_choice auto with strict tools; nothing is prefilled) is a lazily triggered
// grammar: any text that does not contain "<tool_call>" (reasoning included), then optionally
// the calls, each opened by "<tool_call>\n{\"name\": \"" and fully constrained, then the end.
// With "content": {schema} (response_format beside strict tools) the text must instead be a JSON
// value of that schema. A tool whose "parameters" is {"type": "object"} takes any object.
// "syntax" = {"call_open": "<tool_call>\n{\"name\": \"", "args_key": ", \"arguments\": ",
//             "call_close": "}\n</tool_call>", "separator": "\n", "trigger": "<tool_call>",
//             "whole_answer": false}
// A call is call_open NAME args_key ARGS call_close; calls are joined by separator. Lazy text is
// free text without the trigger; with "whole_answer" (Llama 3 JSON: the call is the whole reply)
// it is instead either text whose first non-whitespace byte is not '{', or the calls alone.
// Throws InvalidArgument for a bad spec or a tool schema outside the JSON Schema subset (the
// message names the tool).
#pragma once

#include "core/json.h"
#include "engine/constrain/grammar.h"

namespace vela::constrain {

Grammar tool_call_grammar(const json& spec);

}  // namespace vela::constrain
