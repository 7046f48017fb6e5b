// Tool calling in the Llama 3 JSON dialect end-to-end: `vela serve` on a tiny random model with the
// Llama 3.1 tokenizer and a Llama 3.1-style tool template (the server detects llama3_json from
// it), driven by the official openai / @anthropic-ai/sdk clients. tool_choice required / named
// (OpenAI) and any / tool (Anthropic), strict tools under tool_choice auto, streamed and not,
// with arguments validated by ajv against the tool's schema; the conversation round trip
// (assistant tool_calls with string arguments, tool results) must render like @huggingface/jinja
// (same prompt token count through the Hugging Face tokenizers).
// A random model writes arbitrary allowed tokens: a logit_bias on '"' and '}' keeps strings and
// objects short; validity comes from the grammar alone.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { OpenAI, Anthropic, URL_, KEY, MODEL, post } from "./common.mjs";

const require = createRequire((process.env.NODE_PATH || ".") + "/");
const Ajv2020 = require("ajv/dist/2020").default;
const ajv = new Ajv2020({ strict: false });
const { Template } = require("@huggingface/jinja");
const { Tokenizer } = require("tokenizers");

const MODEL_DIR = process.env.VELA_MODEL_DIR;
const hfTok = Tokenizer.fromFile(path.join(MODEL_DIR, "tokenizer.json"));
const cfg = JSON.parse(fs.readFileSync(path.join(MODEL_DIR, "tokenizer_config.json"), "utf8"));
const template = new Template(cfg.chat_template);
async function ids(text) { return (await hfTok.encode(text, null, { addSpecialTokens: false })).getIds(); }
async function tokenId(text) { const v = await ids(text); assert.equal(v.length, 1, text); return v[0]; }

const openai = new OpenAI({ baseURL: URL_ + "/v1", apiKey: KEY, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: URL_, apiKey: KEY, maxRetries: 0 });
const user = (content) => [{ role: "user", content }];
const QUOTE = await tokenId('"'), CLOSE = await tokenId("}"), OPEN = await tokenId("{");
const STEER = { temperature: 0.8, logit_bias: { [QUOTE]: 15, [CLOSE]: 8 } };
let n_checks = 0, n_calls_checked = 0;
async function check(name, fn) {
  try { await fn(); n_checks++; console.log(`ok   ${name}`); }
  catch (e) { console.log(`FAIL ${name}\n${e.stack}`); process.exitCode = 1; }
}

const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather for a city", strict: true,
    parameters: { type: "object", properties: { city: { type: "string" }, unit: { enum: ["c", "f"] } },
                  required: ["city", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "add", description: "Add two integers",
    parameters: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } },
                  required: ["a", "b"], additionalProperties: false } } },
];
const toolSchema = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));
function checkCall(tc, schemas = toolSchema) {
  const schema = schemas[tc.function.name];
  assert.ok(schema, `unknown tool ${tc.function.name}`);
  assert.ok(ajv.validate(schema, JSON.parse(tc.function.arguments)), tc.function.arguments);
  n_calls_checked++;
}
async function streamedCalls(req) {
  const stream = await openai.chat.completions.create({ ...req, stream: true });
  const calls = [];
  let finish = null, content = "";
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    content += ch.delta.content ?? "";
    for (const d of ch.delta.tool_calls || []) {
      if (d.id) calls[d.index] = { id: d.id, function: { name: d.function.name, arguments: d.function.arguments ?? "" } };
      else calls[d.index].function.arguments += d.function.arguments ?? "";
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  return { calls, finish, content };
}

await check("tool_choice required: calls in the llama3_json dialect, arguments valid (4 seeds + streamed)", async () => {
  for (const seed of [1, 2, 3, 4]) {
    const r = await openai.chat.completions.create({
      model: MODEL, messages: user("Use a tool."), tools, tool_choice: "required", max_tokens: 200, seed, ...STEER,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c));
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    assert.match(c.message.tool_calls[0].id, /^call_/);
    for (const tc of c.message.tool_calls) checkCall(tc);
  }
  const s = await streamedCalls({ model: MODEL, messages: user("Use a tool."), tools, tool_choice: "required",
                                  max_tokens: 200, seed: 9, ...STEER });
  assert.equal(s.finish, "tool_calls");
  assert.equal(s.content, "");
  assert.equal(s.calls.length, 1);
  checkCall(s.calls[0]);
});

await check("tool_choice named: non-streaming, streamed deltas, and the SDK's accumulator agree", async () => {
  const req = { model: MODEL, messages: user("Add."), tools, max_tokens: 200, seed: 5, ...STEER,
                tool_choice: { type: "function", function: { name: "add" } } };
  const r = await openai.chat.completions.create(req);
  const tc = r.choices[0].message.tool_calls[0];
  assert.equal(tc.function.name, "add");
  checkCall(tc);
  const s = await streamedCalls(req);
  assert.equal(s.finish, "tool_calls");
  assert.equal(s.calls.length, 1);
  assert.equal(s.calls[0].function.name, "add");
  assert.equal(s.calls[0].function.arguments, tc.function.arguments, "same seed: streamed = non-streamed");
  const final = await openai.chat.completions.stream(req).finalChatCompletion();
  assert.equal(final.choices[0].message.tool_calls[0].function.arguments, tc.function.arguments);
});

// Strict tools under tool_choice auto: the Llama 3 call is the whole reply, so the lazy grammar
// allows text that does not start with '{' or the calls alone; a logit_bias on '{' makes the
// random model open a call (inside these schemas '{' is only valid where a call or its arguments
// begin, so the bias cannot trap it).
const strictTools = [
  { type: "function", function: { name: "forecast", strict: true,
    parameters: { type: "object", properties: { unit: { enum: ["c", "f"] }, days: { type: "integer", minimum: 1, maximum: 14 },
                                                 hourly: { type: "boolean" } },
                  required: ["unit", "days", "hourly"], additionalProperties: false } } },
  { type: "function", function: { name: "pick", strict: true,
    parameters: { type: "object", properties: { ids: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 } },
                  required: ["ids"], additionalProperties: false } } },
];
const strictSchema = Object.fromEntries(strictTools.map((t) => [t.function.name, t.function.parameters]));
const AUTO_STEER = { temperature: 1, logit_bias: { [OPEN]: 30, [CLOSE]: 6 } };

await check("strict tools under tool_choice auto: calls valid (n = 2, 6 seeds), parallel_tool_calls honoured", async () => {
  let n = 0;
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const r = await openai.chat.completions.create({
      model: MODEL, messages: user("Use a tool if you like."), tools: strictTools, max_tokens: 1500, seed, n: 2,
      parallel_tool_calls: seed % 2 === 0, ...AUTO_STEER,
    });
    for (const c of r.choices) {
      assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c));
      assert.equal(c.message.content, null, JSON.stringify(c.message));
      for (const tc of c.message.tool_calls) checkCall(tc, strictSchema);
      if (seed % 2 === 1) assert.equal(c.message.tool_calls.length, 1);
      n += c.message.tool_calls.length;
    }
  }
  assert.ok(n >= 12);
  // Unbiased, the model writes text that must not open with '{' (or a valid call).
  for (const seed of [1, 2, 3]) {
    const free = await openai.chat.completions.create({
      model: MODEL, messages: user("Hi"), tools: strictTools, max_tokens: 20, seed, temperature: 1,
    });
    const m = free.choices[0].message;
    if (m.tool_calls) for (const tc of m.tool_calls) checkCall(tc, strictSchema);
    else assert.ok(!/^\s*\{/.test(m.content), m.content);
  }
});

await check("strict tools under tool_choice auto, streamed: the deltas rebuild valid calls", async () => {
  const s = await streamedCalls({ model: MODEL, messages: user("Use a tool."), tools: strictTools, max_tokens: 1500,
                                  seed: 11, ...AUTO_STEER });
  assert.equal(s.finish, "tool_calls");
  assert.equal(s.content, "");
  assert.ok(s.calls.length >= 1);
  for (const tc of s.calls) checkCall(tc, strictSchema);
});

await check("anthropic tool_choice any / tool and strict auto: tool_use input valid", async () => {
  const atools = tools.map((t) => ({ name: t.function.name, description: t.function.description,
                                     input_schema: t.function.parameters }));
  for (const tool_choice of [{ type: "any" }, { type: "tool", name: "get_weather" }]) {
    const m = await anthropic.messages.create({
      model: MODEL, max_tokens: 200, messages: user("Use a tool."), tools: atools, tool_choice,
      temperature: 0.8, logit_bias: STEER.logit_bias,
    });
    const use = m.content.find((b) => b.type === "tool_use");
    assert.ok(use, JSON.stringify(m.content));
    assert.match(use.id, /^toolu_/);
    if (tool_choice.name) assert.equal(use.name, tool_choice.name);
    assert.ok(ajv.validate(toolSchema[use.name], use.input), JSON.stringify(use.input));
    assert.equal(m.stop_reason, "tool_use");
    n_calls_checked++;
  }
  const stools = strictTools.map((t) => ({ name: t.function.name, input_schema: t.function.parameters, strict: true }));
  const stream = anthropic.messages.stream({
    model: MODEL, max_tokens: 1500, messages: user("Use a tool."), tools: stools,
    tool_choice: { type: "auto", disable_parallel_tool_use: true }, seed: 3, ...AUTO_STEER,
  });
  const m = await stream.finalMessage();
  const uses = m.content.filter((b) => b.type === "tool_use");
  assert.equal(uses.length, 1, JSON.stringify(m.content));
  assert.ok(ajv.validate(strictSchema[uses[0].name], uses[0].input), JSON.stringify(uses[0].input));
  assert.equal(m.stop_reason, "tool_use");
  n_calls_checked++;
});

// The round trip: what a client sends back after a call. OpenAI clients send the arguments as a
// JSON string and content null; the template receives the arguments as an object (as vLLM and
// transformers do), so it renders {"name": ..., "parameters": {...}} like the model's own call.
function templateMessages(messages) {
  return messages.map((m) => {
    const out = { role: m.role === "developer" ? "system" : m.role, content: m.content ?? "" };
    if (m.tool_calls) {
      out.tool_calls = m.tool_calls.map((c) => {
        let args = c.function.arguments;
        try { const p = JSON.parse(args); if (p && typeof p === "object" && !Array.isArray(p)) args = p; } catch { }
        return { ...(c.id ? { id: c.id } : {}), type: "function", function: { name: c.function.name, arguments: args } };
      });
    }
    if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
    return out;
  });
}
async function expectedPromptTokens(messages, tools, kwargs = {}) {
  const text = template.render({ messages: templateMessages(messages), tools, add_generation_prompt: true,
                                 bos_token: cfg.bos_token, eos_token: cfg.eos_token, ...kwargs });
  return { text, n: (await ids(text)).length };
}

await check("round trip: assistant tool_calls (string arguments) and tool results render like @huggingface/jinja", async () => {
  const kwargs = { date_string: "26 Jul 2024" };
  const first = await openai.chat.completions.create({
    model: MODEL, messages: user("Weather in Paris?"), tools, max_tokens: 200, seed: 2, ...STEER,
    tool_choice: { type: "function", function: { name: "get_weather" } }, chat_template_kwargs: kwargs });
  const call = first.choices[0].message.tool_calls[0];
  checkCall(call);
  const messages = [
    { role: "system", content: "You are terse." },
    ...user("Weather in Paris?"),
    first.choices[0].message,  // content null, arguments a JSON string
    { role: "tool", tool_call_id: call.id, content: "{\"temp\": 21, \"unit\": \"C\"}" },
    { role: "assistant", content: "It is 21 C." },
    ...user("And 2 + 3?"),
    { role: "assistant", content: null, tool_calls: [{ id: "call_2", type: "function",
      function: { name: "add", arguments: "{\"a\": 2, \"b\": 3}" } }] },
    { role: "tool", tool_call_id: "call_2", content: "5" },
  ];
  const r = await openai.chat.completions.create({ model: MODEL, messages, tools, max_tokens: 2,
                                                   chat_template_kwargs: kwargs });
  const want = await expectedPromptTokens(messages, tools, kwargs);
  assert.ok(want.text.includes(`{"name": "add", "parameters": {"a": 2, "b": 3}}<|eot_id|>`), want.text);
  // Meta's own template sends string results through tojson ("5"); the repository's prints them.
  assert.match(want.text, /<\|start_header_id\|>ipython<\|end_header_id\|>\n\n"?5"?<\|eot_id\|>/);
  assert.equal(r.usage.prompt_tokens, want.n, "prompt tokens: vela vs @huggingface/jinja + tokenizers");
  // Anthropic: tool_use / tool_result blocks become the same template messages.
  const atools = tools.map((t) => ({ name: t.function.name, description: t.function.description,
                                     input_schema: t.function.parameters }));
  const amessages = [
    { role: "user", content: "And 2 + 3?" },
    { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "add", input: { a: 2, b: 3 } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "5" }] },
  ];
  const count = await anthropic.messages.countTokens({ model: MODEL, messages: amessages, tools: atools });
  const awant = await expectedPromptTokens([
    { role: "user", content: "And 2 + 3?" },
    { role: "assistant", content: "", tool_calls: [{ id: "toolu_1", type: "function", function: { name: "add", arguments: { a: 2, b: 3 } } }] },
    { role: "tool", tool_call_id: "toolu_1", content: "5" },
  ], atools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.input_schema } })));
  assert.equal(count.input_tokens, awant.n, "count_tokens: vela vs @huggingface/jinja + tokenizers");
  // The template allows one call per assistant turn: its raise_exception is a 400.
  const two = await post("/v1/chat/completions", { model: MODEL, tools, max_tokens: 2, messages: [
    ...user("x"), { role: "assistant", content: null, tool_calls: [
      { id: "a", type: "function", function: { name: "add", arguments: "{}" } },
      { id: "b", type: "function", function: { name: "add", arguments: "{}" } }] }] });
  assert.equal(two.status, 400, two.text);
  assert.ok(two.json.error.message.startsWith("the chat template rejected the messages: "), two.json.error.message);
});

console.log(`${n_checks} checks passed, ${n_calls_checked} tool calls validated`);
