// ChatPrompt: a chat request reduced to what the model's template needs (messages in the
// transformers shape, tools as OpenAI function specs, tool_choice), rendered into prompt token
// ids plus the options the output parser needs. Both API front ends build one; rendering is the
// only place the chat template runs. tool_choice "required" / a named function are honoured by
// prefilling the assistant turn with the opening of a call in the served tool-call dialect
// (tool_call_dialect.h: "<tool_call>\n{\"name\": \"" for hermes, "{\"name\": \"" for
// llama3_json; with a named function also the name), so the model continues inside a call, and
// by constrained decoding (tool_call_constraint): the rest of the call must be a known name and
// arguments valid against that tool's parameters schema. Strict tools under tool_choice auto are
// constrained lazily: from the model's own "<tool_call>" (hermes), or — the Llama 3 call being
// the whole reply — by allowing either text that does not start with '{' or the calls alone.
#pragma once

#include <string>
#include <vector>

#include "core/json.h"
#include "server/chat_output.h"
#include "server/server_context.h"

namespace vela {

struct ChatPrompt {
  json messages = json::array();     // [{"role", "content", ("tool_calls", "reasoning_content")}]
  json tools = nullptr;              // null or [{"type": "function", "function": {...}}]
  std::string tool_choice = "auto";  // auto | none | required | function
  std::string forced_tool;           // tool_choice == "function": its name
  bool parallel_tool_calls = true;   // tool_choice auto with strict tools: more than one call
  json template_kwargs = json::object();  // extra template variables (enable_thinking, ...)
};

struct RenderedPrompt {
  std::string text;
  std::vector<int32_t> ids;
  ChatOutputOptions output;
};

// Throws ApiError 400 when the server has no chat template or the template refuses the messages
// (raise_exception), and for a tool_choice naming an unknown tool.
RenderedPrompt render_chat_prompt(const ServerContext& ctx, const ChatPrompt& p,
                                  const std::string& id_prefix);

// The tool-call constraint (tool_call_grammar.h), kNone when there is none:
// - tool_choice required / a named function: what follows the prefill (every tool's schema);
// - tool_choice auto with at least one `"strict": true` tool: a lazy grammar — free text, or
//   calls whose name and arguments are constrained once "<tool_call>" is written (llama3_json:
//   text not starting with '{', or calls from the first byte on) (strict tools
//   by their schema, the others as any JSON object). `response` is the request's own constraint
//   (response_format): a JSON schema / object becomes the text alternative; any other kind is
//   kept as is (the tools are then not constrained), and so is everything when no tool is strict.
Constraint tool_call_constraint(const ChatPrompt& p, const RenderedPrompt& rp,
                                const Constraint& response);

}  // namespace vela
